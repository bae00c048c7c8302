package imagestore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
)

// ImportOptions tune Import.
type ImportOptions struct {
	// ExpectedSHA256, when set, is the hex SHA-256 the source must have
	// (as published next to a cloud image).
	ExpectedSHA256 string
	// Format, when set, is the format the content must have ("qcow2" or
	// "raw"). When empty, a name ending in .qcow2 or .raw sets it, so that
	// a file whose qcow2 header was damaged is not taken for a raw disk.
	Format string
	// Replace allows overwriting an existing image. VMs already running
	// keep the old file; overlays made over the old content must not be
	// started over the new one, which is the caller's business.
	Replace bool
	// MaxVirtualSize, when set, refuses an image whose virtual size (the
	// disk a guest sees) is larger, with ErrTooLarge: qemu-img info says
	// it before qemu-img check reads the image.
	MaxVirtualSize int64
}

// Import copies the file at srcPath into the store as image name. The
// image appears complete or not at all: the copy goes to a temporary file
// in the target directory, is synced and verified, and only then renamed
// to its name. Verified means: the copy hashes like the source did while
// it was read (and like opts.ExpectedSHA256), qemu-img can open it as
// qcow2 or raw, a qcow2 passes `qemu-img check` and needs no other file
// (no backing file, no external data file). On any failure, including a
// cancelled ctx, nothing is left behind.
func (s *Store) Import(ctx context.Context, name, srcPath string, opts ImportOptions) (img Image, err error) {
	defer func() {
		if err != nil {
			err = fmt.Errorf("import image %q from %s: %w", name, srcPath, err)
		}
	}()
	path, wantFormat, wantSum, err := s.target(name, opts)
	if err != nil {
		return Image{}, err
	}
	// Fail before copying gigabytes; the rename below decides for real.
	if !opts.Replace {
		if _, err := os.Lstat(path); err == nil {
			return Image{}, existsError()
		}
	}

	src, err := os.Open(srcPath)
	if err != nil {
		return Image{}, err
	}
	defer src.Close()
	srcInfo, err := src.Stat()
	if err != nil {
		return Image{}, err
	}
	if !srcInfo.Mode().IsRegular() {
		return Image{}, fmt.Errorf("source is not a regular file")
	}

	dir := filepath.Dir(path)
	// Durably: an image committed into a new subdirectory must not lose
	// the directory to a power cut.
	if _, err := fsutil.MkdirAll(dir, 0o755); err != nil {
		return Image{}, err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+tempMarker+"*")
	if err != nil {
		return Image{}, err
	}
	committed := false
	defer func() {
		if !committed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()

	format, vsize, sum, err := s.copyAndVerify(ctx, tmp, src, srcInfo, srcPath, wantFormat, wantSum, opts.MaxVirtualSize)
	if err != nil {
		return Image{}, err
	}
	img, err = publish(tmp.Name(), name, path, opts.Replace, format, vsize, sum)
	if err != nil {
		return Image{}, err
	}
	committed = true
	return img, nil
}

// publish renames the verified file tmp to path, the file of image name,
// and records what was verified in its sidecar. It fails without touching
// path when path exists and replace is false.
func publish(tmp, name, path string, replace bool, format string, vsize int64, sum string) (Image, error) {
	var err error
	if replace {
		err = os.Rename(tmp, path)
	} else if err = renameNoReplace(tmp, path); errors.Is(err, fs.ErrExist) {
		err = existsError()
	}
	if err != nil {
		return Image{}, err
	}
	if err := fsutil.SyncDir(filepath.Dir(path)); err != nil {
		return Image{}, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return Image{}, err
	}
	// The rename moved the change time, so the key comes from here.
	if key, err := keyOf(fi); err == nil {
		_ = writeSidecar(path, sidecar{Key: key, Format: format, VirtualSize: vsize, SHA256: sum})
	}
	return Image{Name: name, Format: format, VirtualSize: vsize, Size: fi.Size(), SHA256: sum, ModTime: fi.ModTime()}, nil
}

// copyAndVerify copies src into tmp, syncs and closes it, and runs every
// check on the copy. It returns the format, virtual size and SHA-256.
func (s *Store) copyAndVerify(ctx context.Context, tmp, src *os.File, srcInfo fs.FileInfo, srcPath, wantFormat, wantSum string, maxVSize int64) (format string, vsize int64, sum string, err error) {
	h := sha256.New()
	n, err := copySparse(ctx, tmp, io.TeeReader(src, h))
	if err != nil {
		return "", 0, "", fmt.Errorf("copy: %w", err)
	}
	sum = hex.EncodeToString(h.Sum(nil))
	// A source still being written (a download in progress) would give a
	// copy matching neither the old file nor the new one.
	if after, err := src.Stat(); err != nil || after.Size() != n || !after.ModTime().Equal(srcInfo.ModTime()) {
		return "", 0, "", fmt.Errorf("source changed while it was copied (%d bytes read)", n)
	}
	if n == 0 {
		return "", 0, "", fmt.Errorf("%w: source is empty", ErrInvalidImage)
	}
	if err := s.restrict(tmp); err != nil {
		return "", 0, "", err
	}
	if err := tmp.Sync(); err != nil {
		return "", 0, "", fmt.Errorf("sync: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", 0, "", err
	}

	if wantSum != "" && sum != wantSum {
		return "", 0, "", fmt.Errorf("%w: source has sha256 %s, expected %s", ErrChecksumMismatch, sum, wantSum)
	}
	// Read back what was written: a short write or a bad disk shows here.
	copySum, err := hashFile(ctx, tmp.Name())
	if err != nil {
		return "", 0, "", fmt.Errorf("checksum of the copy: %w", err)
	}
	if copySum != sum {
		return "", 0, "", fmt.Errorf("%w: copy has sha256 %s, source read as %s", ErrChecksumMismatch, copySum, sum)
	}
	format, vsize, err = s.verifyContent(ctx, tmp.Name(), srcPath, n, wantFormat, maxVSize)
	return format, vsize, sum, err
}

// verifyContent runs qemu-img's checks on the file at path (shown in
// messages as shown), of n bytes: it must open as qcow2 or raw (wantFormat
// when set), need no other file, be no larger than maxVSize (when set)
// for a guest, and a qcow2 must pass qemu-img check.
func (s *Store) verifyContent(ctx context.Context, path, shown string, n int64, wantFormat string, maxVSize int64) (format string, vsize int64, err error) {
	info, err := s.info(ctx, path, shown)
	if err != nil {
		return "", 0, err
	}
	if err := checkInfo(info); err != nil {
		return "", 0, err
	}
	// Before check, which would read the tables of a disk of any size.
	if err := CheckVirtualSize(info.VirtualSize, maxVSize); err != nil {
		return "", 0, err
	}
	if wantFormat != "" && info.Format != wantFormat {
		return "", 0, fmt.Errorf("%w: content is %s, expected %s (a damaged qcow2 header reads as raw)", ErrInvalidImage, info.Format, wantFormat)
	}
	if info.Format == FormatQCOW2 {
		if err := s.check(ctx, path, shown, n, info); err != nil {
			return "", 0, err
		}
	}
	return info.Format, info.VirtualSize, nil
}

// target is where image name goes and what opts require of its content:
// the format (opts.Format, else the name's extension) and the checksum.
func (s *Store) target(name string, opts ImportOptions) (path, wantFormat, wantSum string, err error) {
	if path, err = s.Path(name); err != nil {
		return "", "", "", err
	}
	if wantFormat, err = expectedFormat(name, opts.Format); err != nil {
		return "", "", "", err
	}
	if wantSum, err = normalizeSHA256(opts.ExpectedSHA256); err != nil {
		return "", "", "", err
	}
	return path, wantFormat, wantSum, nil
}

func existsError() error {
	return fmt.Errorf("image already exists (replace it explicitly): %w", fs.ErrExist)
}

// expectedFormat is opts.Format, else what the name's extension says.
func expectedFormat(name, format string) (string, error) {
	switch format {
	case FormatQCOW2, FormatRaw:
		return format, nil
	case "":
	default:
		return "", fmt.Errorf("format %q: want %s or %s", format, FormatQCOW2, FormatRaw)
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".qcow2":
		return FormatQCOW2, nil
	case ".raw":
		return FormatRaw, nil
	}
	return "", nil
}

// normalizeSHA256 accepts hex in either case, as sha256sum files and web
// pages print it.
func normalizeSHA256(s string) (string, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return "", nil
	}
	if b, err := hex.DecodeString(s); err != nil || len(b) != sha256.Size {
		return "", fmt.Errorf("expected sha256 %q is not 64 hex digits", s)
	}
	return s, nil
}

// CheckVirtualSize refuses a virtual size above limit (when limit is
// set) with ErrTooLarge: the one rule for images downloaded and for the
// images persistent volumes are copied from.
func CheckVirtualSize(vsize, limit int64) error {
	if limit > 0 && vsize > limit {
		return fmt.Errorf("%w: its virtual size is %s (%d bytes), more than the %s this node accepts",
			ErrTooLarge, quantity(vsize), vsize, quantity(limit))
	}
	return nil
}
