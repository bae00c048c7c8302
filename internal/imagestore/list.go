package imagestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// List returns the images in the store, by name. Files qemu-img cannot
// read, or that the store would refuse to import, are listed with Error
// set rather than failing the whole list: an operator put them there and
// should see them.
func (s *Store) List(ctx context.Context) ([]Image, error) {
	var images []Image
	err := filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if path == s.dir {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil // sidecars, imports in progress
		}
		if d.IsDir() {
			return nil
		}
		name, err := filepath.Rel(s.dir, path)
		if err != nil {
			return err
		}
		fi, err := os.Stat(path) // follows a symlink to its file
		if err != nil {
			images = append(images, Image{Name: name, Error: err.Error()})
			return nil
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		img, err := s.inspect(ctx, path, name, fi)
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if err != nil {
			img.Error = err.Error()
		}
		images = append(images, img)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list images in %s: %w", s.dir, err)
	}
	return images, nil
}

// Inspect returns image name; a missing image is fs.ErrNotExist, one the
// store would not import (wrong format, backing file, corrupt header)
// ErrInvalidImage.
func (s *Store) Inspect(ctx context.Context, name string) (Image, error) {
	path, err := s.Path(name)
	if err != nil {
		return Image{}, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return Image{}, fmt.Errorf("image %q: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return Image{}, fmt.Errorf("image %q: not a regular file: %w", name, fs.ErrNotExist)
	}
	img, err := s.inspect(ctx, path, name, fi)
	if err != nil {
		return Image{}, fmt.Errorf("image %q: %w", name, err)
	}
	return img, nil
}

// inspect describes the file at path from its sidecar, or from qemu-img
// and a full read when the sidecar is missing or stale (then written).
func (s *Store) inspect(ctx context.Context, path, name string, fi fs.FileInfo) (Image, error) {
	img := Image{Name: name, Size: fi.Size(), ModTime: fi.ModTime()}
	key, err := keyOf(fi)
	if err != nil {
		return img, err
	}
	if sc, ok := readSidecar(path, key); ok {
		img.Format, img.VirtualSize, img.SHA256 = sc.Format, sc.VirtualSize, sc.SHA256
		return img, nil
	}
	info, err := s.info(ctx, path, name)
	if err != nil {
		return img, err
	}
	if err := checkInfo(info); err != nil {
		return img, err
	}
	sum, err := hashFile(ctx, path)
	if err != nil {
		return img, fmt.Errorf("checksum: %w", err)
	}
	img.Format, img.VirtualSize, img.SHA256 = info.Format, info.VirtualSize, sum
	// Cache only if the file stayed the same while it was read; a cache
	// that cannot be written (read-only store) only costs time.
	if after, err := os.Stat(path); err == nil {
		if k, err := keyOf(after); err == nil && k == key {
			_ = writeSidecar(path, sidecar{Key: key, Format: img.Format, VirtualSize: img.VirtualSize, SHA256: sum})
		}
	}
	return img, nil
}

// checkInfo refuses what a VM must not be given as a base image.
func checkInfo(info imgInfo) error {
	switch info.Format {
	case FormatQCOW2, FormatRaw:
	default:
		return fmt.Errorf("%w: format %q is not supported; convert it with `qemu-img convert -O qcow2`", ErrInvalidImage, info.Format)
	}
	data := info.FormatSpecific.Data
	switch {
	case info.BackingFilename != "":
		// It would name a file outside the store, or one the store does
		// not track; `qemu-img convert` flattens the chain.
		return fmt.Errorf("%w: qcow2 has a backing file %q; images must stand alone (flatten it with `qemu-img convert -O qcow2`)", ErrInvalidImage, info.BackingFilename)
	case data.DataFile != "":
		return fmt.Errorf("%w: qcow2 has an external data file %q; images must stand alone", ErrInvalidImage, data.DataFile)
	case info.Encrypted:
		return fmt.Errorf("%w: image is encrypted", ErrInvalidImage)
	case data.Corrupt:
		return fmt.Errorf("%w: qcow2 is marked corrupt", ErrInvalidImage)
	}
	return nil
}

// ctxReader stops a long read when ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

func hashReader(ctx context.Context, r io.Reader) (string, error) {
	h := sha256.New()
	if _, err := io.CopyBuffer(h, ctxReader{ctx, r}, make([]byte, copyBlock)); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
