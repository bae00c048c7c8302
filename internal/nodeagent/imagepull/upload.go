package imagepull

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
)

// Uploads is where a node gets the images sent by `image upload` (url
// validation.ImageUploadURL): the servers, over the node's authenticated
// API connection (ImageUploads.Download).
type Uploads interface {
	Download(ctx context.Context, in *apiv1.DownloadUploadedImageRequest, opts ...grpc.CallOption) (apiv1.ImageUploads_DownloadClient, error)
}

// fetchUpload downloads uploaded image name (uid) into download, at most
// maxSize bytes, resuming what an earlier attempt for the same Image
// left there. Commit then verifies it as any download (the Image's
// sha256 is the upload's).
func (p *Puller) fetchUpload(ctx context.Context, name, uid, download string, c counter, maxSize int64) error {
	if p.opts.Uploads == nil {
		return errors.New("this node agent cannot pull uploaded images")
	}
	err := p.fetchUploadOnce(ctx, name, uid, download, c, maxSize)
	if errors.Is(err, errRangeNotSatisfiable) {
		// The kept part is longer than the upload (a file damaged on
		// the node): resuming could never succeed, starting over can.
		discard(download)
		err = p.fetchUploadOnce(ctx, name, uid, download, c, maxSize)
	}
	return err
}

func (p *Puller) fetchUploadOnce(ctx context.Context, name, uid, download string, c counter, maxSize int64) error {
	var have int64
	if ri, ok := readResumeInfo(download); ok && ri.ImageUID == uid && ri.URL == validation.ImageUploadURL {
		if fi, err := os.Stat(download); err == nil {
			have = fi.Size()
		}
	} else {
		os.Remove(download)
		b, _ := json.Marshal(resumeInfo{ImageUID: uid, URL: validation.ImageUploadURL})
		if err := fsutil.WriteFileAtomic(resumeInfoPath(download), b, 0o600); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := p.opts.Uploads.Download(ctx, &apiv1.DownloadUploadedImageRequest{Name: name, Uid: uid, Offset: have})
	if err != nil {
		return err
	}
	msg, err := stream.Recv()
	if status.Code(err) == codes.OutOfRange && have > 0 {
		return fmt.Errorf("resuming the upload at byte %d: %w", have, errRangeNotSatisfiable)
	}
	if err != nil {
		return err
	}
	total := msg.GetSizeBytes()
	if total > maxSize {
		return tooLarge(maxSize, fmt.Sprintf("the upload has %d bytes,", total))
	}
	if have > total {
		return fmt.Errorf("resuming the upload at byte %d of %d: %w", have, total, errRangeNotSatisfiable)
	}
	out, err := os.OpenFile(download, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	c.start(have, total)
	n := int64(0)
	for {
		if len(msg.GetData()) > 0 {
			if have+n+int64(len(msg.GetData())) > total {
				err = fmt.Errorf("the server sent more than the upload's %d bytes", total)
				break
			}
			if _, err = out.Write(msg.GetData()); err != nil {
				break
			}
			n += int64(len(msg.GetData()))
			c.add(int64(len(msg.GetData())))
		}
		if msg, err = stream.Recv(); err != nil {
			break
		}
	}
	if err == io.EOF {
		err = nil
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && have+n != total {
		err = &ownError{fmt.Sprintf("got %d bytes of %d", have+n, total)}
	}
	return err
}
