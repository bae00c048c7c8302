package apiserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// qcow2Image makes a qcow2 file with data written in it, and returns its
// bytes.
func qcow2Image(t *testing.T, extra ...string) []byte {
	t.Helper()
	if _, err := exec.LookPath("qemu-io"); err != nil {
		t.Skip("qemu-io not found (Debian package qemu-utils)")
	}
	path := filepath.Join(t.TempDir(), "img.qcow2")
	args := append([]string{"create", "-q", "-f", "qcow2"}, extra...)
	if out, err := exec.Command("qemu-img", append(args, path, "64M")...).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v: %s", err, out)
	}
	if out, err := exec.Command("qemu-io", "-f", "qcow2", "-c", "write -P 0x3c 0 3M", "-c", "write -P 0xc3 20M 2M", path).CombinedOutput(); err != nil {
		t.Fatalf("qemu-io: %v: %s", err, out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// sendFrom writes data[off:] in chunks; cut, when set, is called after
// the first chunk and the call is left to break.
func sendFrom(t *testing.T, c *client.Client, ctx context.Context, name, uid string, data []byte, off int64) (*apiv1.ImageUploadState, error) {
	t.Helper()
	w, err := c.ImageUploads.Write(ctx)
	if err != nil {
		return nil, err
	}
	first := true
	for p := off; p < int64(len(data)); p += 256 << 10 {
		msg := &apiv1.ImageUploadChunk{Data: data[p:min(p+256<<10, int64(len(data)))]}
		if first {
			msg.Name, msg.Uid, msg.Offset, first = name, uid, off, false
		}
		if err := w.Send(msg); err != nil {
			break // the answer says why
		}
	}
	return w.CloseAndRecv()
}

// TestImageUploadResumesAndIsServedWhole: an upload cut mid-way resumes
// from the offset the server confirms; the committed image is what was
// sent, byte for byte, and nodes download it (from an offset too).
func TestImageUploadResumesAndIsServedWhole(t *testing.T) {
	e := newSecEnv(t, Limits{})
	data := qcow2Image(t)
	admin := e.admin()
	begin := &apiv1.BeginImageUploadRequest{Name: "up.qcow2", Sha256: sha(data), SizeBytes: int64(len(data)), Format: "qcow2"}
	st, err := admin.ImageUploads.Begin(ctx(), begin)
	if err != nil {
		t.Fatal(err)
	}
	uid := st.GetImage().GetMetadata().GetUid()
	if st.GetOffset() != 0 || st.GetImage().GetSpec().GetUrl() != "upload:" || st.GetImage().GetStatus().GetUpload().GetPhase() != UploadUploading {
		t.Fatalf("begun: %v", st)
	}

	// The connection breaks after part of the file arrived.
	cutConn := e.admin()
	cctx, cancel := context.WithCancel(ctx())
	w, err := cutConn.ImageUploads.Write(cctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Send(&apiv1.ImageUploadChunk{Name: "up.qcow2", Uid: uid, Data: data[:1<<20]}); err != nil {
		t.Fatal(err)
	}
	part := filepath.Join(e.uploadDir, ".up.qcow2.tmp-pull")
	testutil.Eventually(t, 10*time.Second, "the first chunk on the server's disk", func() bool {
		fi, err := os.Stat(part)
		return err == nil && fi.Size() == 1<<20
	})
	cancel()
	_ = cutConn.Close()

	// Begin again tells where to go on.
	var off int64
	testutil.Eventually(t, 10*time.Second, "the cut write ended on the server", func() bool {
		st, err := admin.ImageUploads.Begin(ctx(), begin)
		if status.Code(err) == codes.Aborted {
			return false // the cut write has not ended yet
		}
		if err != nil {
			t.Fatal(err)
		}
		off = st.GetOffset()
		return st.GetImage().GetStatus().GetUpload().GetBytesReceived() == off
	})
	if off != 1<<20 {
		t.Fatalf("offset after the cut %d, want %d", off, 1<<20)
	}
	// Not from anywhere else.
	_, err = sendFrom(t, admin, ctx(), "up.qcow2", uid, data, 0)
	wantCode(t, "writing from 0 when the server holds 1 MiB", err, codes.FailedPrecondition)
	if !strings.Contains(err.Error(), "resume there") {
		t.Errorf("wrong offset: %v", err)
	}
	// Nor committed before it is whole.
	_, err = admin.ImageUploads.Commit(ctx(), &apiv1.CommitImageUploadRequest{Name: "up.qcow2", Uid: uid})
	wantCode(t, "committing half a file", err, codes.FailedPrecondition)

	got, err := sendFrom(t, admin, ctx(), "up.qcow2", uid, data, off)
	if err != nil || got.GetOffset() != int64(len(data)) {
		t.Fatalf("resumed write: %v %v", got, err)
	}
	img, err := admin.ImageUploads.Commit(ctx(), &apiv1.CommitImageUploadRequest{Name: "up.qcow2", Uid: uid})
	if err != nil {
		t.Fatal(err)
	}
	if up := img.GetStatus().GetUpload(); up.GetPhase() != UploadReady || up.GetBytesReceived() != int64(len(data)) {
		t.Fatalf("committed: %v", up)
	}

	// A node downloads it whole, and from an offset.
	node := e.join("node-a")
	for _, from := range []int64{0, 12345} {
		s, err := node.c.ImageUploads.Download(ctx(), &apiv1.DownloadUploadedImageRequest{Name: "up.qcow2", Uid: uid, Offset: from})
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		size := int64(-1)
		for {
			m, err := s.Recv()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if size < 0 {
				size = m.GetSizeBytes()
			}
			buf.Write(m.GetData())
		}
		if size != int64(len(data)) || !bytes.Equal(buf.Bytes(), data[from:]) {
			t.Fatalf("download from %d: %d bytes of size %d, not the upload's", from, buf.Len(), size)
		}
	}
	// Deleting the Image: its file goes when the next upload begins.
	if _, err := admin.Images.Delete(ctx(), &apiv1.DeleteImageRequest{Name: "up.qcow2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.uploadDir, "up.qcow2")); err != nil {
		t.Fatalf("the committed upload: %v", err)
	}
	if _, err := admin.ImageUploads.Begin(ctx(), &apiv1.BeginImageUploadRequest{Name: "next.qcow2", Sha256: sha(data), SizeBytes: int64(len(data)), Format: "qcow2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(e.uploadDir, "up.qcow2")); !os.IsNotExist(err) {
		t.Errorf("the deleted Image's upload is still there: %v", err)
	}

	// Nodes download; they do not upload.
	_, err = node.c.ImageUploads.Begin(ctx(), &apiv1.BeginImageUploadRequest{Name: "n.qcow2", Sha256: sha(data), SizeBytes: 1, Format: "qcow2"})
	wantCode(t, "a node beginning an upload", err, codes.PermissionDenied)
	// And no one makes an upload Image by hand.
	_, err = admin.Images.Create(ctx(), &apiv1.CreateImageRequest{Image: &apiv1.Image{Metadata: &apiv1.ObjectMeta{Name: "fake.qcow2"}, Spec: &apiv1.ImageSpec{Url: "upload:"}}})
	wantCode(t, "an upload Image made by Create", err, codes.InvalidArgument)
}

// TestImageUploadRefusesWhatIsNotTheFile: a checksum mismatch, or an
// image with a backing file, is refused at commit and nothing of it is
// kept or served.
func TestImageUploadRefusesWhatIsNotTheFile(t *testing.T) {
	e := newSecEnv(t, Limits{})
	admin := e.admin()
	good := qcow2Image(t)
	overlay := qcow2Image(t, "-F", "raw", "-b", "/etc/hostname")
	for _, c := range []struct {
		name, sum string
		data      []byte
		want      string
	}{
		{"mismatch.qcow2", sha(append([]byte("x"), good[1:]...)), good, "checksum mismatch"},
		{"overlay.qcow2", sha(overlay), overlay, "backing file"},
	} {
		st, err := admin.ImageUploads.Begin(ctx(), &apiv1.BeginImageUploadRequest{Name: c.name, Sha256: c.sum, SizeBytes: int64(len(c.data)), Format: "qcow2"})
		if err != nil {
			t.Fatal(err)
		}
		uid := st.GetImage().GetMetadata().GetUid()
		if _, err := sendFrom(t, admin, ctx(), c.name, uid, c.data, 0); err != nil {
			t.Fatal(err)
		}
		_, err = admin.ImageUploads.Commit(ctx(), &apiv1.CommitImageUploadRequest{Name: c.name, Uid: uid})
		wantCode(t, c.name+" committed", err, codes.FailedPrecondition)
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want it to say %q", c.name, err, c.want)
		}
		img, err := admin.Images.Get(ctx(), &apiv1.GetImageRequest{Name: c.name})
		if err != nil {
			t.Fatal(err)
		}
		if up := img.GetStatus().GetUpload(); up.GetPhase() != UploadFailed || !strings.Contains(up.GetMessage(), c.want) {
			t.Errorf("%s: upload status %v", c.name, up)
		}
		entries, _ := os.ReadDir(e.uploadDir)
		for _, d := range entries {
			if strings.Contains(d.Name(), strings.TrimSuffix(c.name, ".qcow2")) {
				t.Errorf("%s: %s kept in the upload directory", c.name, d.Name())
			}
		}
		s, err := admin.ImageUploads.Download(ctx(), &apiv1.DownloadUploadedImageRequest{Name: c.name, Uid: uid})
		if err == nil {
			_, err = s.Recv()
		}
		wantCode(t, c.name+" downloaded", err, codes.FailedPrecondition)
	}
}
