package imagestore

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Hashing a multi-gigabyte image takes seconds, so what List reports is
// computed once and kept beside the image in a sidecar, ".NAME.info.json".
// The sidecar is trusted only while the file is the same one: same inode,
// size and modification time. A file swapped in by rename (image import,
// rsync, cp to a new name and mv) has a new inode and is hashed again.
// The change time is deliberately not part of the key: libvirt chowns base
// images and kernels to QEMU's user on every guest start and back on stop,
// and a multi-gigabyte image must not be re-read for that. Rewriting an
// image in place while keeping its size and mtime goes unnoticed; images
// are not edited in place.

const sidecarSuffix = ".info.json"

// fileKey identifies one version of a file.
type fileKey struct {
	Inode   uint64 `json:"inode"`
	Size    int64  `json:"size"`
	MtimeNs int64  `json:"mtimeNs"`
}

type sidecar struct {
	Key         fileKey `json:"key"`
	Format      string  `json:"format"`
	VirtualSize int64   `json:"virtualSize"`
	SHA256      string  `json:"sha256"`
}

func sidecarPath(imagePath string) string {
	return filepath.Join(filepath.Dir(imagePath), "."+filepath.Base(imagePath)+sidecarSuffix)
}

func keyOf(fi fs.FileInfo) (fileKey, error) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileKey{}, fmt.Errorf("no stat data for %s", fi.Name())
	}
	return fileKey{
		Inode:   st.Ino,
		Size:    st.Size,
		MtimeNs: st.Mtim.Nano(),
	}, nil
}

// readSidecar returns the cached facts for the file with key, if the
// sidecar is there and still describes that file.
func readSidecar(imagePath string, key fileKey) (sidecar, bool) {
	b, err := os.ReadFile(sidecarPath(imagePath))
	if err != nil {
		return sidecar{}, false
	}
	var sc sidecar
	if err := json.Unmarshal(b, &sc); err != nil || sc.Key != key || sc.SHA256 == "" || sc.Format == "" {
		return sidecar{}, false
	}
	return sc, true
}

// writeSidecar stores sc atomically (temporary file and rename), so a
// concurrent reader sees the old sidecar or the new one.
func writeSidecar(imagePath string, sc sidecar) error {
	b, err := json.Marshal(sc)
	if err != nil {
		return err
	}
	path := sidecarPath(imagePath)
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+tempMarker+"*")
	if err != nil {
		return fmt.Errorf("cache checksum: %w", err)
	}
	_, err = f.Write(append(b, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(f.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("cache checksum: %w", err)
	}
	return nil
}
