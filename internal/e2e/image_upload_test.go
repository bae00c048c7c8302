package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// TestImageUploadBootsAVM is issue 35's image upload on the real agent
// binaries: an upload cut after its first megabyte is resumed by
// `image upload` from the offset the server confirms, the server commits
// it (size, sha256, qemu-img), the node pulls it from the server, and a
// VM boots from it.
func TestImageUploadBootsAVM(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	dir, err := testguest.Dir()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(dir, testguest.DiskFile)
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	name := "e2e-up-" + c.ns + ".qcow2"
	// The node's image directory is the package's: the pulled file goes
	// with the test.
	t.Cleanup(func() { _ = os.Remove(filepath.Join(env.imageDir, name)) })
	sum := sha256.Sum256(data)
	begin := &apiv1.BeginImageUploadRequest{Name: name, Sha256: hex.EncodeToString(sum[:]), SizeBytes: int64(len(data)), Format: "qcow2"}

	// A first upload breaks after 1 MiB reached the server.
	st, err := c.api.ImageUploads.Begin(c.ctx, begin)
	c.must(err)
	w, err := c.api.ImageUploads.Write(c.ctx)
	c.must(err)
	c.must(w.Send(&apiv1.ImageUploadChunk{Name: name, Uid: st.GetImage().GetMetadata().GetUid(), Data: data[:1<<20]}))
	c.must(w.Send(&apiv1.ImageUploadChunk{Data: data[1<<20 : 2<<20]}))
	// A message that breaks the stream: the server keeps what it wrote.
	_ = w.Send(&apiv1.ImageUploadChunk{Name: "another.qcow2", Data: []byte("x")})
	if _, err := w.CloseAndRecv(); err == nil {
		t.Fatal("a broken upload stream was accepted")
	}

	began := time.Now()
	stdout, stderr := c.cliMust("image", "upload", name, src)
	t.Logf("image upload in %s: %s%s", time.Since(began).Round(time.Millisecond), stdout, stderr)
	if !strings.Contains(stderr, "resuming the upload of "+name+" at 2Mi") {
		t.Errorf("the upload did not resume at the 2 MiB the server held: %q", stderr)
	}
	img, err := c.api.Images.Get(c.ctx, &apiv1.GetImageRequest{Name: name})
	c.must(err)
	if up := img.GetStatus().GetUpload(); up.GetPhase() != "Ready" || up.GetBytesReceived() != int64(len(data)) {
		t.Fatalf("upload status %v", up)
	}
	// Uploading it again is refused: the image exists.
	if _, _, err := c.cliRun("image", "upload", name, src); err == nil {
		t.Error("a second upload of a committed image was accepted")
	}

	created := time.Now()
	c.create(c.diskVM("up", name, &apiv1.Bootloader{Bios: &apiv1.BIOSBootloader{}}))
	vmi := c.waitRunning("up", "")
	c.waitDiskBoot(vmi.GetMetadata().GetUid(), "bios", created, time.Now())
	testutil.Eventually(t, stateTimeout, "the node reports the uploaded image pulled", func() bool {
		img, err := c.api.Images.Get(c.ctx, &apiv1.GetImageRequest{Name: name})
		c.must(err)
		for _, n := range img.GetStatus().GetNodes() {
			if n.GetNode() == c.node && n.GetPhase() == "Ready" && n.GetSha256() == hex.EncodeToString(sum[:]) {
				return true
			}
		}
		return false
	})
}
