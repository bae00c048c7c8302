package disks

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// ImageTool inspects images and creates the disks guests use.
type ImageTool interface {
	// Info returns the format (qcow2, raw, ...) and virtual size of an
	// image file.
	Info(ctx context.Context, path string) (ImageInfo, error)
	// CreateOverlay creates a qcow2 overlay backed by base.
	CreateOverlay(ctx context.Context, base, baseFormat, overlay string) error
	// CreateBlank creates an empty qcow2 image of size bytes.
	CreateBlank(ctx context.Context, path string, size int64) error
	// CopyResized writes a standalone qcow2 copy of base grown to size
	// bytes (never shrunk).
	CopyResized(ctx context.Context, base, baseFormat, dst string, size int64) error
	// Grow makes the qcow2 image at path size bytes large, a whole
	// number of 512-byte sectors; it refuses to shrink one.
	Grow(ctx context.Context, path string, size int64) error
}

// ImageInfo is what ImageTool.Info reports.
type ImageInfo struct {
	Format      string
	VirtualSize int64
}

// QemuImg is the ImageTool that runs qemu-img (from PATH when Path is
// empty).
type QemuImg struct {
	Path string
}

var _ ImageTool = QemuImg{}

func (q QemuImg) bin() string {
	if q.Path == "" {
		return "qemu-img"
	}
	return q.Path
}

func (q QemuImg) Info(ctx context.Context, path string) (ImageInfo, error) {
	// -U (force share): base images are shared by running guests, whose
	// QEMU holds a lock on them.
	info, err := q.info(ctx, path, "")
	if err != nil {
		return ImageInfo{}, err
	}
	if info.Format == "" {
		return ImageInfo{}, fmt.Errorf("qemu-img info %s: no format reported", path)
	}
	return ImageInfo{Format: info.Format, VirtualSize: info.VirtualSize}, nil
}

// info runs qemu-img info -U on path, read as format ("" probes it).
func (q QemuImg) info(ctx context.Context, path, format string) (FileInfo, error) {
	args := []string{"info", "-U"}
	if format != "" {
		args = append(args, "-f", format)
	}
	out, err := runCommand(ctx, q.bin(), append(args, "--output=json", path)...)
	if err != nil {
		return FileInfo{}, err
	}
	var info struct {
		Format         string `json:"format"`
		VirtualSize    int64  `json:"virtual-size"`
		BackingFile    string `json:"backing-filename"`
		FormatSpecific struct {
			Data struct {
				DataFile string `json:"data-file"`
			} `json:"data"`
		} `json:"format-specific"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return FileInfo{}, fmt.Errorf("qemu-img info %s: decoding output: %w", path, err)
	}
	return FileInfo{Format: info.Format, VirtualSize: info.VirtualSize, BackingFile: info.BackingFile, DataFile: info.FormatSpecific.Data.DataFile}, nil
}

func (q QemuImg) CreateOverlay(ctx context.Context, base, baseFormat, overlay string) error {
	_, err := runCommand(ctx, q.bin(), "create", "-f", "qcow2", "-F", baseFormat, "-b", base, overlay)
	return err
}

func (q QemuImg) CreateBlank(ctx context.Context, path string, size int64) error {
	_, err := runCommand(ctx, q.bin(), "create", "-q", "-f", "qcow2", path, strconv.FormatInt(size, 10))
	return err
}

func (q QemuImg) CopyResized(ctx context.Context, base, baseFormat, dst string, size int64) error {
	if err := q.convert(ctx, baseFormat, base, "qcow2", dst, true); err != nil {
		return err
	}
	info, err := q.Info(ctx, dst)
	if err != nil {
		return err
	}
	if size <= info.VirtualSize {
		return nil
	}
	return q.Grow(ctx, dst, size)
}

// Grow runs qemu-img resize, which takes the image's write lock (so it
// fails rather than resize an image a QEMU has open) and refuses a smaller
// size unless told --shrink, which it never is here. A qcow2 grows
// crash-safely (QEMU's qcow2_co_truncate): a larger L1 table, when one is
// needed, is written aside and flushed before a header write switches to
// it, and the new size is one more header write after that; each state in
// between is a valid image of the old size. A resize killed or cut by a
// power loss leaves the old size or the new one, never a broken image (at
// worst a leaked cluster, which qemu-img check reports and nothing
// minds); the caller compares the size again and grows again.
func (q QemuImg) Grow(ctx context.Context, path string, size int64) error {
	_, err := runCommand(ctx, q.bin(), "resize", "-q", "-f", "qcow2", path, strconv.FormatInt(size, 10))
	return err
}

// runCommand runs a command from an argument list (never a shell) and
// returns its stdout; a failure carries its stderr, which is where the
// tools explain themselves.
func runCommand(ctx context.Context, path string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			return nil, fmt.Errorf("%s %s: %w", path, strings.Join(args, " "), err)
		}
		return nil, fmt.Errorf("%s %s: %w: %s", path, strings.Join(args, " "), err, msg)
	}
	return stdout.Bytes(), nil
}

// Convert writes a standalone qcow2 copy of the qcow2 image src to dst
// (the snapshot and restore copies). shared (-U) reads an image a running
// QEMU holds open, which only an image that stands still may be (a volume
// under a snapshot overlay); without it qemu-img takes the image's lock,
// so a QEMU writing to src makes the copy fail instead of tearing it.
func (q QemuImg) Convert(ctx context.Context, src, dst string, shared bool) error {
	return q.convert(ctx, "qcow2", src, "qcow2", dst, shared)
}

// ConvertTo writes a copy of the qcow2 image src to dst as format (raw:
// a sparse file; qcow2: standalone), read shared (-U): a VM export's
// files, made from the volume of a stopped VM, whose start must not be
// refused its disk (the export ends then anyway).
func (q QemuImg) ConvertTo(ctx context.Context, src, dst, format string) error {
	return q.convert(ctx, "qcow2", src, format, dst, true)
}

// convert runs qemu-img convert of src, read as inFormat (given: never
// probed), to dst in outFormat; shared (-U) as Convert says.
func (q QemuImg) convert(ctx context.Context, inFormat, src, outFormat, dst string, shared bool) error {
	args := []string{"convert", "-q", "-f", inFormat, "-O", outFormat}
	if shared {
		args = append(args, "-U")
	}
	_, err := runCommand(ctx, q.bin(), append(args, src, dst)...)
	return err
}

// ConvertRaw writes the raw (sparse) file src as a qcow2 image dst whose
// clusters are only those src has data in (a restored backup's volume).
func (q QemuImg) ConvertRaw(ctx context.Context, src, dst string) error {
	return q.convert(ctx, "raw", src, "qcow2", dst, false)
}

// Commit merges the qcow2 overlay into its backing file, with no QEMU
// running on either (an online snapshot's overlay left by a guest that
// stopped before the overlay was committed).
func (q QemuImg) Commit(ctx context.Context, overlay string) error {
	_, err := runCommand(ctx, q.bin(), "commit", "-q", "-f", "qcow2", overlay)
	return err
}
