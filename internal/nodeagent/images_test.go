package nodeagent

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks/diskstest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

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
// early heartbeat, once, and unchanged listings cost no beat (the
// heartbeat loop's side of that: TestHeartbeatLoopBeatsEarlyForAPendingList;
// the inventory's: disks.TestImageRefresh). On the fake clock, stepped a
// refresh period at a time, the regular beat never comes.
func TestImagesRegisteredAndSentOnChange(t *testing.T) {
	diskstest.NeedQemuImg(t)
	const refresh = time.Second
	h := newHarness(t, harnessOptions{heartbeatInterval: time.Hour})
	rec := &recordingHeartbeats{NodesClient: h.api.Nodes}
	h.api.Nodes = rec
	diskstest.WriteFile(t, filepath.Join(h.imageDir, "disk.raw"), make([]byte, 8192))
	h.runAgent(h.onFakeClock, func(o *Options) { o.Timing.ImageRefreshPeriod = refresh })
	storedImages := func() string {
		n, err := h.stores.Nodes.Get(h.ctx, "", testNode)
		if err != nil {
			return ""
		}
		return diskstest.ImageNames(n.GetStatus().GetImages())
	}
	// The first listing runs at once: registration needs no step.
	testutil.Eventually(t, waitTimeout, "node registered with its image", func() bool { return storedImages() == "disk.raw" })
	rec.mu.Lock()
	registered := rec.registered
	rec.mu.Unlock()
	if len(registered) != 1 || registered[0].GetSha256() != diskstest.SHA256(make([]byte, 8192)) {
		t.Errorf("registered with %v", registered)
	}
	testutil.Eventually(t, waitTimeout, "first heartbeat", func() bool { _, n := rec.withImages(); return n >= 1 })

	// New images appear whole (renamed into place), as a listing may run
	// at any step.
	aside := t.TempDir()
	place := func(name string, data []byte) {
		diskstest.WriteFile(t, filepath.Join(aside, name), data)
		if err := os.Rename(filepath.Join(aside, name), filepath.Join(h.imageDir, name)); err != nil {
			t.Fatal(err)
		}
	}
	place("vmlinuz", []byte("kernel"))
	sentLists := func() int { sent, _ := rec.withImages(); return len(sent) }
	h.stepUntil(refresh, "the new image sent long before the next regular heartbeat", func() bool { return sentLists() == 1 })
	if got := storedImages(); got != "disk.raw vmlinuz" {
		t.Fatalf("stored images %q", got)
	}
	// The clock moves on over listings of the unchanged directory, then
	// the directory changes once more. The inventory lists in order, so
	// once that change is sent every earlier listing is done, and none
	// of them may have cost a beat.
	for range 5 {
		h.clock.Step(refresh)
	}
	place("z.raw", make([]byte, 4096))
	h.stepUntil(refresh, "the second new image sent", func() bool { return sentLists() == 2 })
	sent, beats := rec.withImages()
	if beats != 3 || diskstest.ImageNames(sent[0].GetItems()) != "disk.raw vmlinuz" ||
		diskstest.ImageNames(sent[1].GetItems()) != "disk.raw vmlinuz z.raw" || storedImages() != "disk.raw vmlinuz z.raw" {
		t.Fatalf("%d heartbeats carried %d lists; want the first without one, then one early beat per changed list", beats, len(sent))
	}
}

// Hashing a large new image holds up neither registration (beyond
// registerImageWait on the agent's clock: disks.TestForRegister) nor
// heartbeats, and stopping the agent stops it.
func TestHashingDoesNotDelayHeartbeats(t *testing.T) {
	diskstest.NeedQemuImg(t)
	if testing.Short() {
		t.Skip("hashes until the agent stops")
	}
	h := newHarness(t, harnessOptions{heartbeatInterval: time.Second})
	rec := &recordingHeartbeats{NodesClient: h.api.Nodes}
	h.api.Nodes = rec
	// Sparse: nothing is written, but hashing reads 1 TiB of zeros,
	// which takes many minutes: the listing never ends while the test
	// runs, and an agent whose stop did not end it would outlast
	// stopTimeout.
	f, err := os.Create(filepath.Join(h.imageDir, "huge.raw"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil {
		t.Skipf("no sparse 1 TiB file here: %v", err)
	}
	f.Close()
	_, stop := h.runAgent(h.onFakeClock)
	h.stepUntil(time.Second, "registered while hashing", func() bool {
		_, err := h.stores.Nodes.Get(h.ctx, "", testNode)
		return err == nil
	})
	h.stepUntil(time.Second, "three heartbeats while hashing", func() bool { _, n := rec.withImages(); return n >= 3 })
	n, _ := h.stores.Nodes.Get(h.ctx, "", testNode)
	if len(n.GetStatus().GetImages()) != 0 {
		t.Errorf("images reported before hashing finished: %v", n.Status.Images)
	}
	// Run returns only once the inventory's listing returned: stop fails
	// the test if that takes longer than stopTimeout.
	stop()
}
