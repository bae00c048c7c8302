package export

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
)

// fileExt is the extension of a format's download, and of the file made
// for it (gzip is streamed from the raw file).
func fileExt(format string) string {
	switch format {
	case apiv1.ExportFormatQcow2:
		return "qcow2"
	case apiv1.ExportFormatGzip:
		return "img.gz"
	}
	return "img"
}

// file is the file a download of volume in format reads, made on the
// first request (one conversion however many ask at once) and kept for
// the export's life: raw (sparse) for raw and gzip, qcow2 for qcow2.
func (s *Server) file(ctx context.Context, uid, volume, format string, src volumeSource) (string, error) {
	out := apiv1.ExportFormatRaw
	if format == apiv1.ExportFormatQcow2 {
		out = apiv1.ExportFormatQcow2
	}
	dir, err := s.exportDir(uid)
	if err != nil {
		return "", err
	}
	path, err := nodedir.FileIn(dir, volume+"."+out)
	if err != nil {
		return "", err
	}
	_, err, _ = s.files.Do(path, func() (any, error) {
		if _, err := os.Stat(path); err == nil {
			return nil, nil
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		tmp := path + ".tmp"
		_ = os.Remove(tmp)
		convert := func() error { return s.convert(ctx, src.path, tmp, out) }
		if src.rbd != nil {
			convert = func() error { return src.rbd.ExportTo(ctx, src.image, tmp, out) }
		}
		if err := convert(); err != nil {
			_ = os.Remove(tmp)
			return nil, err
		}
		if err := os.Rename(tmp, path); err != nil {
			_ = os.Remove(tmp)
			return nil, err
		}
		return nil, nil
	})
	if err != nil {
		return "", err
	}
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
	return path, nil
}

// convert runs qemu-img convert from the qcow2 src (the format is given:
// never probed) to dst in format. -U reads without taking the image's
// lock, so that a VM starting meanwhile is not refused its disk; the
// export ends then anyway.
func (s *Server) convert(ctx context.Context, src, dst, format string) error {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, s.opts.QemuImg, "convert", "-q", "-U", "-f", "qcow2", "-O", format, src, dst)
	cmd.Stderr = &limitedBuffer{b: &stderr, max: 4096}
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("qemu-img convert of %s to %s: %w: %s", filepath.Base(src), format, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// limitedBuffer keeps the first max bytes written to it.
type limitedBuffer struct {
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}
