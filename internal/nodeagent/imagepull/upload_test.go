package imagepull

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// uploadServer serves data as the servers' ImageUploads.Download does:
// the size first, then the bytes from the offset; an offset past the end
// is OutOfRange.
type uploadServer struct {
	data    []byte
	offsets []int64
}

func (u *uploadServer) Download(_ context.Context, in *apiv1.DownloadUploadedImageRequest, _ ...grpc.CallOption) (apiv1.ImageUploads_DownloadClient, error) {
	u.offsets = append(u.offsets, in.GetOffset())
	if in.GetOffset() > int64(len(u.data)) {
		return &uploadStream{err: status.Errorf(codes.OutOfRange, "offset %d: the image has %d bytes", in.GetOffset(), len(u.data))}, nil
	}
	msgs := []*apiv1.ImageData{{SizeBytes: int64(len(u.data))}}
	for rest := u.data[in.GetOffset():]; len(rest) > 0; {
		n := min(len(rest), 3)
		msgs = append(msgs, &apiv1.ImageData{Data: rest[:n]})
		rest = rest[n:]
	}
	return &uploadStream{msgs: msgs}, nil
}

type uploadStream struct {
	grpc.ClientStream
	msgs []*apiv1.ImageData
	err  error
}

func (s *uploadStream) Recv() (*apiv1.ImageData, error) {
	if s.err != nil {
		return nil, s.err
	}
	if len(s.msgs) == 0 {
		return nil, io.EOF
	}
	m := s.msgs[0]
	s.msgs = s.msgs[1:]
	return m, nil
}

type nopCounter struct{}

func (nopCounter) start(int64, int64) {}
func (nopCounter) add(int64)          {}

// keep leaves a partial download of uid with the given bytes, as an
// earlier attempt would have.
func keep(t *testing.T, download, uid string, data []byte) {
	t.Helper()
	if err := os.WriteFile(download, data, 0o600); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(resumeInfo{ImageUID: uid, URL: validation.ImageUploadURL})
	if err := os.WriteFile(resumeInfoPath(download), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestFetchUploadResumesAndStartsOverWhenTheKeptPartIsLonger(t *testing.T) {
	const uid = "0b9c4b52-8a5e-4b55-9a4e-4a4e0f6e2c11"
	data := []byte("an uploaded image of some bytes")
	for _, tc := range []struct {
		name        string
		kept        []byte
		wantOffsets []int64
	}{
		{"nothing kept", nil, []int64{0}},
		{"a prefix kept", data[:10], []int64{10}},
		{"all kept, not committed", data, []int64{int64(len(data))}},
		{"longer than the upload", append(bytes.Clone(data), "garbage"...), []int64{int64(len(data)) + 7, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			download := filepath.Join(t.TempDir(), "img.download")
			if tc.kept != nil {
				keep(t, download, uid, tc.kept)
			}
			srv := &uploadServer{data: data}
			p := &Puller{opts: Options{Uploads: srv}}
			if err := p.fetchUpload(context.Background(), "img", uid, download, nopCounter{}, 1<<20); err != nil {
				t.Fatalf("fetchUpload: %v", err)
			}
			got, err := os.ReadFile(download)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("download holds %q (%v), want %q", got, err, data)
			}
			if !slices.Equal(srv.offsets, tc.wantOffsets) {
				t.Fatalf("asked for offsets %v, want %v", srv.offsets, tc.wantOffsets)
			}
		})
	}
}
