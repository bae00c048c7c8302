// Package imagestore manages a node's image directory: the base images
// (qcow2 or raw) that image volumes are overlaid on and persistent volumes
// are copied from. Volumes name images by their path relative to the
// directory (validation.ResolveImagePath).
//
// Files whose name starts with "." belong to the store: cached checksums
// and imports in progress. They never show up as images, and image names
// may not start with ".".
package imagestore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
)

// DefaultDir is where nodes keep their images.
const DefaultDir = "/var/lib/virtplane/images"

// Image formats the store holds.
const (
	FormatQCOW2 = "qcow2"
	FormatRaw   = "raw"
)

// Errors callers may test with errors.Is. A missing image is
// fs.ErrNotExist and an existing one fs.ErrExist.
var (
	ErrInvalidName = errors.New("invalid image name")
	// ErrChecksumMismatch: the copy does not hash like the source, or not
	// like the checksum the caller expected.
	ErrChecksumMismatch = errors.New("checksum mismatch")
	// ErrInvalidImage: qemu-img cannot open the image, finds it corrupt or
	// truncated, or it is of a kind the store refuses (another format, a
	// backing file, an external data file, encryption).
	ErrInvalidImage = errors.New("invalid image")
	// ErrTooLarge: the image's virtual size is above
	// ImportOptions.MaxVirtualSize.
	ErrTooLarge = errors.New("image too large")
)

// Image describes one image in the store.
type Image struct {
	// Name is the path relative to the store directory.
	Name string `json:"name"`
	// Format is qcow2 or raw, as qemu-img probes the content.
	Format string `json:"format"`
	// VirtualSize is the size of the disk the guest sees, in bytes.
	VirtualSize int64 `json:"virtual_size"`
	// Size is the length of the file in bytes (what SHA256 covers).
	Size int64 `json:"size"`
	// SHA256 is the hex SHA-256 of the file.
	SHA256  string    `json:"sha256"`
	ModTime time.Time `json:"mod_time"`
	// Error says why List could not inspect the file; Format,
	// VirtualSize and SHA256 are then empty.
	Error string `json:"error,omitempty"`
}

// Store is an image directory. Its methods may be called concurrently,
// also by several processes (the agent and the CLI): every change is a
// rename.
type Store struct {
	dir         string
	qemuImgPath string
}

// Open opens the image directory dir, creating it if missing, and removes
// what crashed imports left behind.
func Open(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("image directory %q: %w", dir, err)
	}
	if _, err := fsutil.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("image directory: %w", err)
	}
	qemuImg, err := exec.LookPath("qemu-img")
	if err != nil {
		return nil, fmt.Errorf("qemu-img not found (Debian package qemu-utils): %w", err)
	}
	s := &Store{dir: abs, qemuImgPath: qemuImg}
	s.removeStaleTemps(time.Now().Add(-staleTempAge))
	return s, nil
}

// Dir returns the store's absolute directory.
func (s *Store) Dir() string { return s.dir }

// Path returns the absolute path of image name, after checking the name.
// It does not check that the image exists.
func (s *Store) Path(name string) (string, error) {
	if err := ValidateName(name); err != nil {
		return "", err
	}
	return validation.ResolveImagePath(s.dir, name)
}

// ValidateName checks an image name for the store. The rule is
// validation.ValidateImageName, the one the API applies to the images
// volumes name and nodes list, so that every name the API accepts is a
// file of the store and never one of its own dot files: relative and
// local, in clean form (one image, one name), and no element starting
// with "." (checksum sidecars, imports in progress).
func ValidateName(name string) error {
	if errs := validation.ValidateImageName(name, field.NewPath("name")); len(errs) > 0 {
		return fmt.Errorf("%w %q: %w", ErrInvalidName, name, errs.ToAggregate())
	}
	return nil
}

// Remove deletes image name and its cached checksum. Removing an image
// that running VMs use is the caller's business: their QEMU keeps the
// open file, but new overlays cannot be made.
func (s *Store) Remove(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	path, err := s.Path(name)
	if err != nil {
		return err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("remove image %q: %w", name, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("remove image %q: is a directory: %w", name, fs.ErrNotExist)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove image %q: %w", name, err)
	}
	if err := os.Remove(sidecarPath(path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove image %q: cached checksum: %w", name, err)
	}
	return fsutil.SyncDir(filepath.Dir(path))
}
