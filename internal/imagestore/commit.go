package imagestore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// pullSuffix names the file a download of an image is written to, next to
// where the image will be: ".NAME.tmp-pull". It carries the temporary
// marker, so listings skip it and a download abandoned for longer than
// staleTempAge is removed when the store is opened.
const pullSuffix = tempMarker + "pull"

// DownloadPath returns where a download of image name is written before
// Commit verifies and publishes it, and creates its directory. The file
// survives a crash of the downloader, so a later download can resume it.
func (s *Store) DownloadPath(name string) (string, error) {
	path, err := s.Path(name)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	return filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+pullSuffix), nil
}

// Commit verifies the downloaded file at DownloadPath(name) and renames it
// to image name, so the image appears complete and verified or not at
// all: it must hash as opts.ExpectedSHA256 (when set), open as qcow2 or
// raw (opts.Format, else the name's extension, when either says), need no
// other file, and a qcow2 must pass qemu-img check. The file is read back
// from disk for the checksum, so what is published is what was checked.
// On failure the download is removed: it is not worth resuming.
func (s *Store) Commit(ctx context.Context, name string, opts ImportOptions) (img Image, err error) {
	tmp, err := s.DownloadPath(name)
	if err != nil {
		return Image{}, err
	}
	defer func() {
		if err != nil {
			if ctx.Err() == nil {
				os.Remove(tmp)
			}
			err = fmt.Errorf("image %q: %w", name, err)
		}
	}()
	path, wantFormat, wantSum, err := s.target(name, opts)
	if err != nil {
		return Image{}, err
	}
	fi, err := os.Stat(tmp)
	if err != nil {
		return Image{}, err
	}
	if fi.Size() == 0 {
		return Image{}, fmt.Errorf("%w: the download is empty", ErrInvalidImage)
	}
	if err := syncFile(tmp); err != nil {
		return Image{}, err
	}
	sum, err := hashFile(ctx, tmp)
	if err != nil {
		return Image{}, fmt.Errorf("checksum: %w", err)
	}
	if wantSum != "" && sum != wantSum {
		return Image{}, fmt.Errorf("%w: the download has sha256 %s, expected %s", ErrChecksumMismatch, sum, wantSum)
	}
	format, vsize, err := s.verifyContent(ctx, tmp, name, fi.Size(), wantFormat, opts.MaxVirtualSize)
	if err != nil {
		return Image{}, err
	}
	f, err := os.Open(tmp)
	if err != nil {
		return Image{}, err
	}
	err = s.restrict(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Image{}, err
	}
	return publish(tmp, name, path, opts.Replace, format, vsize, sum)
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
