package apiserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Image upload (docs/export.md, "Image upload"): `image upload` sends a
// file to this server in chunks (Write), each appended at the offset the
// server holds durably, so an interrupted upload resumes where the server
// says (Begin). Commit has the image store verify the whole file as a
// node verifies a download (size, SHA-256, qemu-img: format, no backing
// or data file, virtual size) and publish it; anything else is removed
// and the upload marked Failed, so nothing half-made is ever served.
// Nodes pull a committed upload with Download, over this authenticated
// API, as they pull other Images by URL.

// Upload phases (ImageStatus.upload.phase).
const (
	UploadUploading = "Uploading"
	UploadReady     = "Ready"
	UploadFailed    = "Failed"
)

// UploadChunkSize is the most data one Write message carries.
const UploadChunkSize = 1 << 20

// downloadChunk is what one Download message carries.
const downloadChunk = 256 << 10

type imageUploadService struct {
	apiv1.UnimplementedImageUploadsServer
	s *Server

	once  sync.Once
	store *imagestore.Store
	err   error
	// busy holds the uploads a Write or Commit works on, by image name:
	// one at a time.
	mu   sync.Mutex
	busy map[string]bool
}

func newImageUploadService(s *Server) apiv1.ImageUploadsServer {
	return &imageUploadService{s: s, busy: map[string]bool{}}
}

// images is the upload directory's image store, opened on first use.
func (u *imageUploadService) images() (*imagestore.Store, error) {
	if u.s.opts.UploadDir == "" || u.s.stores.Images == nil {
		return nil, status.Error(codes.FailedPrecondition, "this server takes no image uploads")
	}
	u.once.Do(func() { u.store, u.err = imagestore.Open(u.s.opts.UploadDir) })
	if u.err != nil {
		return nil, status.Errorf(codes.Internal, "upload directory: %v", u.err)
	}
	return u.store, nil
}

// hold marks name busy for the caller; release with the returned func.
func (u *imageUploadService) hold(name string) (func(), error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.busy[name] {
		return nil, status.Errorf(codes.Aborted, "image %s: another upload call is under way", name)
	}
	u.busy[name] = true
	return func() { u.mu.Lock(); delete(u.busy, name); u.mu.Unlock() }, nil
}

// partInfo is kept beside an upload's part file: which Image (uid) it
// belongs to, so that a re-created Image never continues an old file.
type partInfo struct {
	ImageUID string `json:"imageUID"`
}

func (u *imageUploadService) part(st *imagestore.Store, name string) (string, error) {
	p, err := st.DownloadPath(name)
	if err != nil {
		return "", status.Errorf(codes.InvalidArgument, "name: %v", err)
	}
	return p, nil
}

// offset is what the part file of Image uid holds, 0 when it is another
// Image's (then removed).
func partOffset(part, uid string) (int64, error) {
	var pi partInfo
	b, err := os.ReadFile(part + ".json")
	if err != nil || json.Unmarshal(b, &pi) != nil || pi.ImageUID != uid {
		_ = os.Remove(part)
		return 0, fsutil.WriteFileAtomic(part+".json", mustJSON(partInfo{ImageUID: uid}), 0o600)
	}
	fi, err := os.Stat(part)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func (u *imageUploadService) Begin(ctx context.Context, req *apiv1.BeginImageUploadRequest) (*apiv1.ImageUploadState, error) {
	st, err := u.images()
	if err != nil {
		return nil, err
	}
	img := &apiv1.Image{
		Metadata: &apiv1.ObjectMeta{Name: req.GetName()},
		Spec: &apiv1.ImageSpec{Url: validation.ImageUploadURL, Sha256: req.GetSha256(), Format: req.GetFormat(),
			Nodes: req.GetNodes(), MaxSize: strconv.FormatInt(req.GetSizeBytes(), 10)},
	}
	errs := validation.ValidateImage(img)
	if req.GetSha256() == "" {
		errs = append(errs, field.Required(field.NewPath("sha256"), "the whole file's SHA-256: the server commits nothing else"))
	}
	if f := req.GetFormat(); f != validation.ImageFormatQCOW2 && f != validation.ImageFormatRaw {
		errs = append(errs, field.NotSupported(field.NewPath("format"), f, []string{validation.ImageFormatQCOW2, validation.ImageFormatRaw}))
	}
	if n, limit := req.GetSizeBytes(), u.s.opts.ImagePolicy.MaxSizeCap; n <= 0 || n > limit {
		errs = append(errs, field.Invalid(field.NewPath("size_bytes"), n, fmt.Sprintf("must be between 1 and the servers' image size cap, %d (serve --image-max-size-cap)", limit)))
	}
	if len(errs) > 0 {
		return nil, validation.ToStatusError("Image", req.GetName(), errs)
	}
	u.sweep(ctx, st)
	release, err := u.hold(req.GetName())
	if err != nil {
		return nil, err
	}
	defer release()
	cur, err := u.s.stores.Images.Get(ctx, "", req.GetName())
	switch {
	case errors.Is(err, store.ErrNotFound):
		// A committed file of an Image deleted since is not this one's.
		_ = st.Remove(ctx, req.GetName())
		img.Status = &apiv1.ImageStatus{Upload: &apiv1.ImageUpload{Phase: UploadUploading, SizeBytes: req.GetSizeBytes()}}
		if cur, err = u.s.stores.Images.Create(ctx, img); err != nil {
			return nil, toStatus(err)
		}
		u.s.log.Info("image upload begun", "image", req.GetName(), "uid", cur.GetMetadata().GetUid(), "bytes", req.GetSizeBytes(), "sha256", req.GetSha256())
	case err != nil:
		return nil, toStatus(err)
	default:
		sp, up := cur.GetSpec(), cur.GetStatus().GetUpload()
		if sp.GetUrl() != validation.ImageUploadURL || sp.GetSha256() != req.GetSha256() || up.GetSizeBytes() != req.GetSizeBytes() {
			return nil, status.Errorf(codes.AlreadyExists, "image %s exists and is not an upload of this file (sha256 %s, %d bytes): delete it first", req.GetName(), req.GetSha256(), req.GetSizeBytes())
		}
		if up.GetPhase() != UploadUploading {
			return nil, status.Errorf(codes.AlreadyExists, "image %s: its upload is %s already: delete the image to upload it again", req.GetName(), up.GetPhase())
		}
	}
	part, err := u.part(st, req.GetName())
	if err != nil {
		return nil, err
	}
	off, err := partOffset(part, cur.GetMetadata().GetUid())
	if err != nil {
		return nil, status.Errorf(codes.Internal, "upload of %s: %v", req.GetName(), err)
	}
	return &apiv1.ImageUploadState{Image: cur, Offset: off}, nil
}

// uploading is the Image of an upload under way, checked against uid.
func (u *imageUploadService) uploading(ctx context.Context, name, uid string) (*apiv1.Image, error) {
	img, err := u.s.stores.Images.Get(ctx, "", name)
	if err != nil {
		return nil, toStatus(err)
	}
	if img.GetMetadata().GetUid() != uid || img.GetSpec().GetUrl() != validation.ImageUploadURL {
		return nil, status.Errorf(codes.FailedPrecondition, "image %s is not the upload %s (it was deleted or made again): begin again", name, uid)
	}
	if p := img.GetStatus().GetUpload().GetPhase(); p != UploadUploading {
		return nil, status.Errorf(codes.FailedPrecondition, "image %s: its upload is %s", name, p)
	}
	return img, nil
}

func (u *imageUploadService) Write(stream apiv1.ImageUploads_WriteServer) error {
	st, err := u.images()
	if err != nil {
		return err
	}
	ctx := stream.Context()
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	name := first.GetName()
	if err := imagestore.ValidateName(name); err != nil {
		return status.Errorf(codes.InvalidArgument, "name: %v", err)
	}
	release, err := u.hold(name)
	if err != nil {
		return err
	}
	defer release()
	img, err := u.uploading(ctx, name, first.GetUid())
	if err != nil {
		return err
	}
	part, err := u.part(st, name)
	if err != nil {
		return err
	}
	have, err := partOffset(part, img.GetMetadata().GetUid())
	if err != nil {
		return status.Errorf(codes.Internal, "upload of %s: %v", name, err)
	}
	if first.GetOffset() != have {
		return status.Errorf(codes.FailedPrecondition, "offset: the server holds %d bytes of image %s: resume there, not at %d", have, name, first.GetOffset())
	}
	f, err := os.OpenFile(part, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return status.Errorf(codes.Internal, "upload of %s: %v", name, err)
	}
	size := img.GetStatus().GetUpload().GetSizeBytes()
	off := have
	// Whatever ends the stream, what was written is made durable, and
	// that is the offset the next Begin tells.
	done := func(werr error) error {
		serr := f.Sync()
		if cerr := f.Close(); serr == nil {
			serr = cerr
		}
		if werr == nil && serr != nil {
			werr = status.Errorf(codes.Internal, "upload of %s: %v", name, serr)
		}
		u.noteReceived(ctx, name, img.GetMetadata().GetUid(), off)
		return werr
	}
	msg := first
	for {
		data := msg.GetData()
		if len(data) > UploadChunkSize {
			return done(status.Errorf(codes.InvalidArgument, "data: %d bytes in one message, at most %d", len(data), UploadChunkSize))
		}
		if off+int64(len(data)) > size {
			return done(status.Errorf(codes.InvalidArgument, "data: more than the %d bytes begun with", size))
		}
		if _, err := f.Write(data); err != nil {
			return done(status.Errorf(codes.Internal, "upload of %s: %v", name, err))
		}
		off += int64(len(data))
		msg, err = stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return done(err)
		}
		if msg.GetName() != "" && msg.GetName() != name || msg.GetOffset() != 0 && msg.GetOffset() != off {
			return done(status.Error(codes.InvalidArgument, "only the first message names the upload and its offset"))
		}
	}
	if err := done(nil); err != nil {
		return err
	}
	return stream.SendAndClose(&apiv1.ImageUploadState{Image: img, Offset: off})
}

// noteReceived records the bytes held in the Image's status, for people
// (the part file is what counts).
func (u *imageUploadService) noteReceived(ctx context.Context, name, uid string, n int64) {
	ctx = context.WithoutCancel(ctx)
	_, err := u.s.stores.Images.GuaranteedUpdate(ctx, "", name, func(cur *apiv1.Image) (*apiv1.Image, error) {
		if cur.GetMetadata().GetUid() != uid || cur.GetStatus().GetUpload().GetPhase() != UploadUploading {
			return nil, errNoChange
		}
		cur.Status.Upload.BytesReceived = n
		return cur, nil
	})
	if err != nil && !errors.Is(err, errNoChange) {
		u.s.log.Warn("recording an upload's progress", "image", name, "err", err)
	}
}

var errNoChange = errors.New("no change")

func (u *imageUploadService) Commit(ctx context.Context, req *apiv1.CommitImageUploadRequest) (*apiv1.Image, error) {
	st, err := u.images()
	if err != nil {
		return nil, err
	}
	name := req.GetName()
	if err := imagestore.ValidateName(name); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "name: %v", err)
	}
	release, err := u.hold(name)
	if err != nil {
		return nil, err
	}
	defer release()
	img, err := u.uploading(ctx, name, req.GetUid())
	if err != nil {
		return nil, err
	}
	part, err := u.part(st, name)
	if err != nil {
		return nil, err
	}
	size := img.GetStatus().GetUpload().GetSizeBytes()
	if have, err := partOffset(part, req.GetUid()); err != nil || have != size {
		return nil, status.Errorf(codes.FailedPrecondition, "image %s: the server holds %d of its %d bytes: upload the rest first", name, have, size)
	}
	got, cerr := st.Commit(ctx, name, imagestore.ImportOptions{
		ExpectedSHA256: img.GetSpec().GetSha256(), Format: img.GetSpec().GetFormat(), Replace: true,
		MaxVirtualSize: u.s.opts.ImagePolicy.MaxVirtualSize,
	})
	if cerr != nil && ctx.Err() != nil {
		return nil, toStatus(ctx.Err())
	}
	_ = os.Remove(part + ".json")
	out, err := u.s.stores.Images.GuaranteedUpdate(context.WithoutCancel(ctx), "", name, func(cur *apiv1.Image) (*apiv1.Image, error) {
		if cur.GetMetadata().GetUid() != req.GetUid() {
			return nil, status.Errorf(codes.FailedPrecondition, "image %s was made again meanwhile", name)
		}
		up := cur.GetStatus().GetUpload()
		up.BytesReceived = size
		if cerr != nil {
			// Commit removed the file: nothing of it is served.
			up.Phase, up.Message = UploadFailed, cerr.Error()
		} else {
			up.Phase, up.Message = UploadReady, ""
		}
		return cur, nil
	})
	if err != nil {
		return nil, toStatus(err)
	}
	if cerr != nil {
		u.s.log.Warn("image upload refused", "image", name, "err", cerr)
		return nil, status.Errorf(codes.FailedPrecondition, "image %s refused, nothing of it kept: %v", name, cerr)
	}
	u.s.log.Info("image upload committed", "image", name, "uid", req.GetUid(), "format", got.Format, "virtual_size", got.VirtualSize, "sha256", got.SHA256)
	return out, nil
}

func (u *imageUploadService) Download(req *apiv1.DownloadUploadedImageRequest, stream apiv1.ImageUploads_DownloadServer) error {
	st, err := u.images()
	if err != nil {
		return err
	}
	ctx := stream.Context()
	name := req.GetName()
	if err := imagestore.ValidateName(name); err != nil {
		return status.Errorf(codes.InvalidArgument, "name: %v", err)
	}
	img, err := u.s.stores.Images.Get(ctx, "", name)
	if err != nil {
		return toStatus(err)
	}
	if img.GetMetadata().GetUid() != req.GetUid() || img.GetStatus().GetUpload().GetPhase() != UploadReady {
		return status.Errorf(codes.FailedPrecondition, "image %s (%s) has no committed upload on this server", name, req.GetUid())
	}
	path, err := st.Path(name)
	if err != nil {
		return status.Errorf(codes.InvalidArgument, "name: %v", err)
	}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		// Another server of the control plane took the upload.
		return status.Errorf(codes.Unavailable, "image %s was uploaded to another server", name)
	}
	if err != nil {
		return status.Errorf(codes.Internal, "image %s: %v", name, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return status.Errorf(codes.Internal, "image %s: %v", name, err)
	}
	if req.GetOffset() < 0 || req.GetOffset() > fi.Size() {
		return status.Errorf(codes.OutOfRange, "offset %d: the image has %d bytes", req.GetOffset(), fi.Size())
	}
	if _, err := f.Seek(req.GetOffset(), io.SeekStart); err != nil {
		return status.Errorf(codes.Internal, "image %s: %v", name, err)
	}
	buf := make([]byte, downloadChunk)
	first := true
	for {
		n, rerr := f.Read(buf)
		if n > 0 || first {
			msg := &apiv1.ImageData{Data: buf[:n]}
			if first {
				msg.SizeBytes, first = fi.Size(), false
			}
			if err := stream.Send(msg); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return status.Errorf(codes.Internal, "image %s: %v", name, rerr)
		}
	}
}

// sweep removes committed uploads whose Image is gone (or is no upload
// any more): deleting an Image leaves its file here until the next
// upload begins.
func (u *imageUploadService) sweep(ctx context.Context, st *imagestore.Store) {
	files, err := st.List(ctx)
	if err != nil || len(files) == 0 {
		return
	}
	imgs, _, err := u.s.stores.Images.List(ctx, store.ListOptions{})
	if err != nil {
		return
	}
	uploads := map[string]bool{}
	for _, img := range imgs {
		if img.GetSpec().GetUrl() == validation.ImageUploadURL {
			uploads[img.GetMetadata().GetName()] = true
		}
	}
	for _, f := range files {
		if !uploads[f.Name] {
			if err := st.Remove(ctx, f.Name); err != nil {
				u.s.log.Warn("removing an upload whose Image is gone", "image", f.Name, "err", err)
			} else {
				u.s.log.Info("upload removed: its Image is gone", "image", f.Name)
			}
		}
	}
}
