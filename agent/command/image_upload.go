package command

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// uploadChunk is what one Write message carries (the server takes up to
// 1 MiB).
const uploadChunk = 1 << 20

type imageUploadOptions struct {
	*rootOptions
	format, nodes string
	retries       int
	clock         clock.WithTicker
}

func newImageUploadCommand(root *rootOptions, clk clock.WithTicker) *cobra.Command {
	o := &imageUploadOptions{rootOptions: root, clock: clk}
	cmd := &cobra.Command{
		Use:   "upload NAME FILE",
		Short: "Upload a disk image from this machine to the cluster",
		Long: `Upload FILE as Image NAME: streamed to the server in 1 MiB chunks (the file
is read twice, once to hash it and once to send it, and never held whole),
resumed from what the server holds after a broken connection (up to
--retries times, and by running the same command again), and checked at the
end: the server commits the image only if its size and SHA-256 are this
file's and qemu-img finds it a standalone qcow2 or raw image within the
servers' virtual size limit; anything else is removed. Nodes then pull it
from the servers as they pull Images by URL. docs/export.md, "Image upload".`,
		Example: `  virtplane-agent image upload debian-12.qcow2 ./debian-12-genericcloud-amd64.qcow2
  virtplane-agent image upload tools.raw ./tools.img --format raw --nodes all`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], args[1])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.format, "format", "", "qcow2 or raw (default from NAME's extension, else qcow2)")
	f.StringVar(&o.nodes, "nodes", "", `"all": every node pulls it once it is uploaded; default: a node pulls it when an instance needs it`)
	f.IntVar(&o.retries, "retries", 5, "how often a broken upload is resumed before giving up")
	return cmd
}

// fileSHA256 hashes a file as it streams by.
func fileSHA256(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

func (o *imageUploadOptions) run(ctx context.Context, out, errOut io.Writer, name, path string) error {
	format := o.format
	if format == "" {
		format = "qcow2"
		if strings.HasSuffix(name, ".raw") || strings.HasSuffix(name, ".img") {
			format = "raw"
		}
	}
	sum, size, err := fileSHA256(path)
	if err != nil {
		return err
	}
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	begin := &apiv1.BeginImageUploadRequest{Name: name, Sha256: sum, SizeBytes: size, Format: format, Nodes: o.nodes}
	p := newByteProgress(errOut, isTerminal(errOut), size, o.clock)
	var st *apiv1.ImageUploadState
	for attempt := 0; ; attempt++ {
		st, err = beginUpload(ctx, c, o.clock, begin)
		if err != nil {
			return describeError(err, imageResource, name)
		}
		if attempt == 0 && st.GetOffset() > 0 {
			fmt.Fprintf(errOut, "resuming the upload of %s at %s\n", name, formatBytes(st.GetOffset()))
		}
		p.done.Store(st.GetOffset())
		stop := p.start()
		err = sendUpload(ctx, c, path, name, st.GetImage().GetMetadata().GetUid(), st.GetOffset(), p)
		stop()
		if err == nil {
			break
		}
		if ctx.Err() != nil || attempt >= o.retries || !resumable(err) {
			return fmt.Errorf("upload of %s broke (run the same command again to resume): %w", name, err)
		}
		fmt.Fprintf(errOut, "upload broke (%v); resuming\n", status.Convert(err).Message())
	}
	img, err := c.ImageUploads.Commit(ctx, &apiv1.CommitImageUploadRequest{Name: name, Uid: st.GetImage().GetMetadata().GetUid()})
	if err != nil {
		return describeError(err, imageResource, name)
	}
	_, err = fmt.Fprintf(out, "image %s uploaded: %s bytes, sha256 %s; nodes pull it from the servers\n", name, fmt.Sprint(size), img.GetSpec().GetSha256())
	return err
}

// beginUpload begins (or finds) the upload; a Write of the same upload
// still ending on the server (Aborted) is waited for.
func beginUpload(ctx context.Context, c *client.Client, clk clock.WithTicker, req *apiv1.BeginImageUploadRequest) (*apiv1.ImageUploadState, error) {
	for i := 0; ; i++ {
		st, err := c.ImageUploads.Begin(ctx, req)
		if status.Code(err) != codes.Aborted || i >= 20 {
			return st, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-clk.After(500 * time.Millisecond):
		}
	}
}

// resumable: the connection or the server broke, not the request.
func resumable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.Canceled, codes.DeadlineExceeded, codes.Aborted, codes.Internal, codes.Unknown:
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF)
}

// sendUpload streams path from off to the server.
func sendUpload(ctx context.Context, c *client.Client, path, name, uid string, off int64, counter io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w, err := c.ImageUploads.Write(ctx)
	if err != nil {
		return err
	}
	buf := make([]byte, uploadChunk)
	first := true
	for {
		n, rerr := io.ReadFull(f, buf)
		if n > 0 || first {
			msg := &apiv1.ImageUploadChunk{Data: buf[:n]}
			if first {
				msg.Name, msg.Uid, msg.Offset, first = name, uid, off, false
			}
			if err := w.Send(msg); err != nil {
				break // CloseAndRecv tells why
			}
			_, _ = counter.Write(buf[:n])
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	_, err = w.CloseAndRecv()
	return err
}
