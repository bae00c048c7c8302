package nodeagent

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// needQemuImg skips tests that list images: imagestore reads them with
// qemu-img.
func needQemuImg(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed (Debian package qemu-utils)")
	}
}

func nodeImageNames(items []*apiv1.NodeImage) string {
	names := make([]string, len(items))
	for i, img := range items {
		names[i] = img.GetName()
	}
	return strings.Join(names, " ")
}

// recordingHeartbeats keeps the image lists heartbeats carried (nil for
// none) and counts registrations.
type recordingHeartbeats struct {
	apiv1.NodesClient
	mu         sync.Mutex
	beats      []*apiv1.NodeImageList
	registered []*apiv1.NodeImage
}

func (r *recordingHeartbeats) Register(ctx context.Context, in *apiv1.RegisterNodeRequest, opts ...grpc.CallOption) (*apiv1.Node, error) {
	r.mu.Lock()
	r.registered = in.GetNode().GetStatus().GetImages()
	r.mu.Unlock()
	return r.NodesClient.Register(ctx, in, opts...)
}

func (r *recordingHeartbeats) Heartbeat(ctx context.Context, in *apiv1.HeartbeatRequest, opts ...grpc.CallOption) (*apiv1.HeartbeatResponse, error) {
	resp, err := r.NodesClient.Heartbeat(ctx, in, opts...)
	if err == nil {
		r.mu.Lock()
		r.beats = append(r.beats, in.GetImages())
		r.mu.Unlock()
	}
	return resp, err
}

// withImages returns the image lists heartbeats carried so far, and how
// many heartbeats there were.
func (r *recordingHeartbeats) withImages() ([]*apiv1.NodeImageList, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*apiv1.NodeImageList
	for _, l := range r.beats {
		if l != nil {
			out = append(out, l)
		}
	}
	return out, len(r.beats)
}

// The agent registers with its images; a changed list goes out with an
// early heartbeat, once, and an unchanged one costs no beat at all.
func TestImagesRegisteredAndSentOnChange(t *testing.T) {
	needQemuImg(t)
	// Regular beats are too far apart to matter here.
	h := newHarness(t, harnessOptions{heartbeatInterval: time.Minute})
	rec := &recordingHeartbeats{NodesClient: h.api.Nodes}
	h.api.Nodes = rec
	writeFileData(t, filepath.Join(h.imageDir, "disk.raw"), make([]byte, 8192))
	h.runAgent(func(o *Options) { o.Timing.ImageRefreshPeriod = 50 * time.Millisecond })
	storedImages := func() string {
		n, err := h.stores.Nodes.Get(h.ctx, "", testNode)
		if err != nil {
			return ""
		}
		return nodeImageNames(n.GetStatus().GetImages())
	}
	testutil.Eventually(t, waitTimeout, "node registered with its image", func() bool { return storedImages() == "disk.raw" })
	rec.mu.Lock()
	registered := rec.registered
	rec.mu.Unlock()
	if len(registered) != 1 || registered[0].GetSha256() != fmt.Sprintf("%x", sha256.Sum256(make([]byte, 8192))) {
		t.Errorf("registered with %v", registered)
	}
	testutil.Eventually(t, waitTimeout, "first heartbeat", func() bool { _, n := rec.withImages(); return n >= 1 })

	writeFileData(t, filepath.Join(h.imageDir, "vmlinuz"), []byte("kernel"))
	testutil.Eventually(t, waitTimeout, "new image stored long before the next regular heartbeat", func() bool { return storedImages() == "disk.raw vmlinuz" })
	testutil.Consistently(t, 10*50*time.Millisecond, "no heartbeat while no new list is pending", func() bool {
		_, beats := rec.withImages()
		return beats == 2
	})
	sent, beats := rec.withImages()
	if beats != 2 || len(sent) != 1 || nodeImageNames(sent[0].GetItems()) != "disk.raw vmlinuz" {
		t.Fatalf("%d heartbeats carried %d lists; want the first without one, then one early beat with the changed list", beats, len(sent))
	}
}

// Hashing a large new image holds up neither registration (beyond
// registerImageWait) nor heartbeats, and stopping the agent stops it.
func TestHashingDoesNotDelayHeartbeats(t *testing.T) {
	needQemuImg(t)
	if testing.Short() {
		t.Skip("hashes for several seconds")
	}
	h := newHarness(t, harnessOptions{heartbeatInterval: time.Second})
	rec := &recordingHeartbeats{NodesClient: h.api.Nodes}
	h.api.Nodes = rec
	// Sparse: nothing is written, but hashing reads 64 GiB of zeros,
	// far longer than the test runs.
	f, err := os.Create(filepath.Join(h.imageDir, "huge.raw"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 30); err != nil {
		t.Skipf("no sparse 64 GiB file here: %v", err)
	}
	f.Close()
	start := time.Now()
	_, stop := h.runAgent()
	testutil.Eventually(t, waitTimeout, "registered", func() bool {
		_, err := h.stores.Nodes.Get(h.ctx, "", testNode)
		return err == nil
	})
	if took := time.Since(start); took > registerImageWait+3*time.Second {
		t.Errorf("registration took %v while hashing", took)
	}
	testutil.Eventually(t, waitTimeout, "three heartbeats while hashing", func() bool { _, n := rec.withImages(); return n >= 3 })
	n, _ := h.stores.Nodes.Get(h.ctx, "", testNode)
	if len(n.GetStatus().GetImages()) != 0 {
		t.Errorf("images reported before hashing finished: %v", n.Status.Images)
	}
	stopped := time.Now()
	stop()
	if took := time.Since(stopped); took > 5*time.Second {
		t.Errorf("stopping took %v: hashing did not stop with the agent", took)
	}
}
