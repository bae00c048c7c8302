package export

import (
	"context"
	"os"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
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
		convert := func() error { return disks.QemuImg{Path: s.opts.QemuImg}.ConvertTo(ctx, src.path, tmp, out) }
		if src.rbd != nil {
			convert = func() error { return src.rbd.ExportTo(ctx, src.image, tmp, out) }
		}
		if err := convert(); err != nil {
			_ = os.Remove(tmp)
			return nil, err
		}
		// Durably: the file is served for the export's life, across a
		// restart of the node, so it must never name a partial copy.
		if err := fsutil.Commit(tmp, path); err != nil {
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
