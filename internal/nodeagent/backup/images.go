package backup

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
)

// QemuImg is the Images that runs qemu-img (from PATH when Path is
// empty), with argument lists only.
type QemuImg struct {
	Path string
}

var _ Images = QemuImg{}

func (q QemuImg) bin() string {
	if q.Path == "" {
		return "qemu-img"
	}
	return q.Path
}

// FromRaw writes the raw file src as a qcow2 image dst, whose clusters
// are only those src has data in.
func (q QemuImg) FromRaw(ctx context.Context, src, dst string) error {
	_, err := run(ctx, q.bin(), "convert", "-q", "-f", "raw", "-O", "qcow2", src, dst)
	return err
}

// VirtualSize is an image's virtual size.
func (q QemuImg) VirtualSize(ctx context.Context, path string) (int64, error) {
	out, err := run(ctx, q.bin(), "info", "-U", "--output=json", path)
	if err != nil {
		return 0, err
	}
	var info struct {
		VirtualSize int64 `json:"virtual-size"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return 0, fmt.Errorf("qemu-img info %s: %w", path, err)
	}
	return info.VirtualSize, nil
}

// run runs a command and returns its stdout; a failure carries stderr.
func run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("%s %s: %w: %s", name, args[0], err, msg)
		}
		return nil, fmt.Errorf("%s %s: %w", name, args[0], err)
	}
	return stdout.Bytes(), nil
}
