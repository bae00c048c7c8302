package imagewait

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	testclock "k8s.io/utils/clock/testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// fakeImageWatch serves Watch from a script: each watch call takes events
// from the channel (see serveScript).
type fakeImageWatch struct {
	apiv1.UnimplementedImagesServer
	events chan *apiv1.ImageEvent
	mu     sync.Mutex
	opts   []*apiv1.WatchOptions
}

func (f *fakeImageWatch) Watch(req *apiv1.WatchImagesRequest, stream grpc.ServerStreamingServer[apiv1.ImageEvent]) error {
	f.mu.Lock()
	f.opts = append(f.opts, req.GetOptions())
	f.mu.Unlock()
	return serveScript(stream.Context(), f.events, stream.Send)
}

// serveScript sends events until the stream ends; a nil event fails the
// stream, as an agent restart would.
func serveScript[E any](ctx context.Context, events <-chan *E, send func(*E) error) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev := <-events:
			if ev == nil {
				return status.Error(codes.Unavailable, "agent restarting")
			}
			if err := send(ev); err != nil {
				return err
			}
		}
	}
}

func (f *fakeImageWatch) watchOptions() []*apiv1.WatchOptions {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*apiv1.WatchOptions(nil), f.opts...)
}

// fakeNodeWatch lists nodes, then sends the scripted events.
type fakeNodeWatch struct {
	apiv1.UnimplementedNodesServer
	nodes  []*apiv1.Node
	events chan *apiv1.NodeEvent
}

func (f *fakeNodeWatch) Watch(_ *apiv1.WatchNodesRequest, stream grpc.ServerStreamingServer[apiv1.NodeEvent]) error {
	for _, n := range f.nodes {
		if err := stream.Send(&apiv1.NodeEvent{Type: apiv1.EventType_ADDED, Object: n}); err != nil {
			return err
		}
	}
	if err := stream.Send(&apiv1.NodeEvent{Type: apiv1.EventType_SYNCED}); err != nil {
		return err
	}
	return serveScript(stream.Context(), f.events, stream.Send)
}

type waitResult struct {
	img *apiv1.Image
	v   Verdict
	err error
}

// harness is a Watcher on an in-process gRPC server with the fakes, on a
// fake clock.
type harness struct {
	imgs  *fakeImageWatch
	nodes *fakeNodeWatch
	clock *testclock.FakeClock
	w     Watcher
}

// newHarness serves the fakes; without nodes the Nodes service is not
// registered at all.
func newHarness(t *testing.T, nodes ...*apiv1.Node) *harness {
	t.Helper()
	h := &harness{
		imgs:  &fakeImageWatch{events: make(chan *apiv1.ImageEvent)},
		nodes: &fakeNodeWatch{nodes: nodes, events: make(chan *apiv1.NodeEvent)},
		clock: testclock.NewFakeClock(time.Unix(1000, 0)),
	}
	conn := testutil.ServeGRPC(t, func(s grpc.ServiceRegistrar) {
		apiv1.RegisterImagesServer(s, h.imgs)
		if len(nodes) > 0 {
			apiv1.RegisterNodesServer(s, h.nodes)
		}
	})
	h.w = Watcher{Images: apiv1.NewImagesClient(conn), Nodes: apiv1.NewNodesClient(conn), Clock: h.clock,
		Log: func(ctx context.Context, msg string, args ...any) { t.Log(append([]any{msg}, args...)...) }}
	return h
}

// start runs Wait (or Follow) from start in the background.
func (h *harness) start(ctx context.Context, start *apiv1.Image, onChange OnChange, follow bool) <-chan waitResult {
	out := make(chan waitResult, 1)
	go func() {
		run := h.w.Wait
		if follow {
			run = h.w.Follow
		}
		img, v, err := run(ctx, start, onChange)
		out <- waitResult{img, v, err}
	}()
	return out
}

// reopen lets the pause after a failed watch pass, once the follower
// waits in it.
func (h *harness) reopen(t *testing.T) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, "a failed watch to pause", h.clock.HasWaiters)
	h.clock.Step(ReopenPause)
}

// push hands ev to the fake's watch, failing rather than hanging when no
// watch takes it (the wait ended early).
func push[E any](t *testing.T, ch chan<- E, ev E) {
	t.Helper()
	select {
	case ch <- ev:
	case <-time.After(5 * time.Second):
		t.Fatal("no watch took the event: the wait ended before it")
	}
}

func modified(img *apiv1.Image) *apiv1.ImageEvent {
	return &apiv1.ImageEvent{Type: apiv1.EventType_MODIFIED, Object: img, ResourceVersion: img.Metadata.ResourceVersion}
}

func result(t *testing.T, out <-chan waitResult) waitResult {
	t.Helper()
	select {
	case r := <-out:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not return")
		return waitResult{}
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// The wait follows the Image from the version create returned, survives
// a failed watch (opened again where it left off, after the pause), and
// ends once every ready, schedulable node reports the image Ready.
func TestWaitUntilEveryNodeHasIt(t *testing.T) {
	h := newHarness(t, testNode("a", true, true, false), testNode("b", true, true, false), testNode("c", false, true, false))
	out := h.start(testContext(t), imageWith(5), nil, false)
	push(t, h.imgs.events, modified(imageWith(6, entry("a", "Ready"))))
	push(t, h.imgs.events, nil) // the stream fails
	h.reopen(t)
	push(t, h.imgs.events, modified(imageWith(7, entry("a", "Ready"), entry("b", "Pulling"))))
	push(t, h.imgs.events, modified(imageWith(8, entry("a", "Ready"), entry("b", "Ready"))))
	r := result(t, out)
	if r.err != nil || !r.v.Done || r.img.GetMetadata().GetResourceVersion() != 8 || len(r.v.Targets) != 2 {
		t.Fatalf("Wait = rv %d, %+v, %v; want done at rv 8 with 2 targets", r.img.GetMetadata().GetResourceVersion(), r.v, r.err)
	}
	opts := h.imgs.watchOptions()
	if len(opts) != 2 || opts[0].GetName() != "debian.qcow2" || opts[0].GetResourceVersion() != 5 || opts[1].GetResourceVersion() != 6 {
		t.Errorf("watches %v, want debian.qcow2 from rv 5, then again from rv 6", opts)
	}
}

// A failed node watch is opened again, and the nodes listed anew.
func TestWaitSurvivesTheNodeWatchFailing(t *testing.T) {
	h := newHarness(t, testNode("a", true, true, false))
	seen := make(chan string, 100)
	out := h.start(testContext(t), imageWith(5), func(_ *apiv1.Image, v Verdict) error { seen <- v.State; return nil }, false)
	if s := <-seen; s != "0 of 1 nodes have it; waiting for a (not started)" {
		t.Fatalf("first state %q", s)
	}
	push(t, h.nodes.events, nil)
	h.reopen(t)
	// Listed again: the same state.
	if s := <-seen; s != "0 of 1 nodes have it; waiting for a (not started)" {
		t.Fatalf("state after the node watch was opened again: %q", s)
	}
	push(t, h.imgs.events, modified(imageWith(6, entry("a", "Ready"))))
	if r := result(t, out); r.err != nil || !r.v.Done {
		t.Fatalf("Wait = %+v, %v; want done", r.v, r.err)
	}
}

// A node's failure ends the wait with its message, although the node
// reports Pulling again right after: the watch delivers every version.
func TestWaitFailsWithTheNodesMessage(t *testing.T) {
	h := newHarness(t, testNode("a", true, true, false))
	out := h.start(testContext(t), imageWith(5), nil, false)
	failed := entry("a", "Failed")
	failed.Message = `image "debian.qcow2": checksum mismatch: the download has sha256 00aa, expected 5da2`
	push(t, h.imgs.events, modified(imageWith(6, failed)))
	r := result(t, out)
	var pe *PullError
	// Without the node's repetition of the image's name.
	if !errors.As(r.err, &pe) || pe.Node != "a" || !strings.HasPrefix(pe.Message, "checksum mismatch: the download") {
		t.Fatalf("Wait err = %v, want a's checksum mismatch", r.err)
	}
	if r.img.GetMetadata().GetResourceVersion() != 6 || r.v.Failed != pe {
		t.Errorf("returned rv %d, verdict %+v; want the failed version 6 and its failure", r.img.GetMetadata().GetResourceVersion(), r.v)
	}
}

// A node that stops answering is no longer waited for.
func TestWaitNodeLeavingEndsTheWait(t *testing.T) {
	h := newHarness(t, testNode("a", true, true, false), testNode("b", true, true, false))
	out := h.start(testContext(t), imageWith(5), nil, false)
	push(t, h.imgs.events, modified(imageWith(6, entry("a", "Ready"))))
	push(t, h.nodes.events, &apiv1.NodeEvent{Type: apiv1.EventType_MODIFIED, Object: testNode("b", false, true, false)})
	r := result(t, out)
	if r.err != nil || !r.v.Done || len(r.v.Targets) != 1 {
		t.Fatalf("Wait = %+v, %v; want done with one target", r.v, r.err)
	}
}

func TestWaitDeleted(t *testing.T) {
	h := newHarness(t, testNode("a", true, true, false))
	out := h.start(testContext(t), imageWith(5), nil, false)
	push(t, h.imgs.events, &apiv1.ImageEvent{Type: apiv1.EventType_DELETED, Object: imageWith(6), ResourceVersion: 6})
	if r := result(t, out); status.Code(r.err) != codes.NotFound {
		t.Fatalf("Wait err = %v, want NotFound", r.err)
	}

	// Re-created under the same name meanwhile: not the image waited for.
	h = newHarness(t, testNode("a", true, true, false))
	out = h.start(testContext(t), imageWith(5), nil, false)
	other := imageWith(9, entry("a", "Ready"))
	other.Metadata.Uid = "uid-other"
	push(t, h.imgs.events, &apiv1.ImageEvent{Type: apiv1.EventType_RESET})
	push(t, h.imgs.events, &apiv1.ImageEvent{Type: apiv1.EventType_ADDED, Object: other, ResourceVersion: 9})
	if r := result(t, out); status.Code(r.err) != codes.NotFound {
		t.Fatalf("Wait err = %v after a re-create, want NotFound", r.err)
	}

	// Deleted while the watch was down: listed again without it.
	h = newHarness(t, testNode("a", true, true, false))
	out = h.start(testContext(t), imageWith(5), nil, false)
	push(t, h.imgs.events, &apiv1.ImageEvent{Type: apiv1.EventType_RESET})
	push(t, h.imgs.events, &apiv1.ImageEvent{Type: apiv1.EventType_SYNCED, ResourceVersion: 10})
	if r := result(t, out); status.Code(r.err) != codes.NotFound {
		t.Fatalf("Wait err = %v after a listing without the image, want NotFound", r.err)
	}
}

// When ctx ends the verdict says who is still pulling, and how far.
func TestWaitCancelledSaysWho(t *testing.T) {
	h := newHarness(t, testNode("a", true, true, false), testNode("b", true, true, false))
	ctx, cancel := context.WithCancel(testContext(t))
	seen := make(chan string, 10)
	out := h.start(ctx, imageWith(5), func(_ *apiv1.Image, v Verdict) error { seen <- v.State; return nil }, false)
	pulling := entry("b", "Pulling")
	pulling.BytesDone, pulling.BytesTotal = 512, 1024
	push(t, h.imgs.events, modified(imageWith(6, entry("a", "Ready"), pulling)))
	for s := range seen {
		if strings.Contains(s, "pulling") {
			break
		}
	}
	cancel()
	r := result(t, out)
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("err = %v, want the context's", r.err)
	}
	if r.v.State != "1 of 2 nodes have it; waiting for b (pulling: 50% of 1.0 KiB)" {
		t.Errorf("last state %q does not say who is pulling", r.v.State)
	}
}

// Follow goes on after every node has the image and after a failure,
// until ctx ends; onChange sees every version.
func TestFollowGoesOn(t *testing.T) {
	h := newHarness(t, testNode("a", true, true, false))
	ctx, cancel := context.WithCancel(testContext(t))
	seen := make(chan int64, 10)
	out := h.start(ctx, imageWith(5), func(img *apiv1.Image, _ Verdict) error {
		seen <- img.GetMetadata().GetResourceVersion()
		return nil
	}, true)
	push(t, h.imgs.events, modified(imageWith(6, entry("a", "Ready"))))
	push(t, h.imgs.events, modified(imageWith(7, entry("a", "Failed"))))
	push(t, h.imgs.events, modified(imageWith(8, entry("a", "Pulling"))))
	for rv := range seen {
		if rv == 8 {
			break
		}
	}
	select {
	case r := <-out:
		t.Fatalf("Follow returned by itself: %+v, %v", r.v, r.err)
	default:
	}
	cancel()
	if r := result(t, out); !errors.Is(r.err, context.Canceled) || r.img.GetMetadata().GetResourceVersion() != 8 {
		t.Fatalf("Follow = rv %d, %v; want rv 8 and the context's error", r.img.GetMetadata().GetResourceVersion(), r.err)
	}
}

// onChange's error ends the following, as is.
func TestOnChangeErrorEnds(t *testing.T) {
	h := newHarness(t, testNode("a", true, true, false))
	broken := errors.New("write /dev/stderr: broken pipe")
	out := h.start(testContext(t), imageWith(5), func(*apiv1.Image, Verdict) error { return broken }, true)
	if r := result(t, out); !errors.Is(r.err, broken) {
		t.Fatalf("err = %v, want onChange's", r.err)
	}
}

// A watch no retry mends (here: an agent without the Nodes service) ends
// the wait instead of spinning until the timeout.
func TestWaitPermanentWatchError(t *testing.T) {
	h := newHarness(t)
	r := result(t, h.start(testContext(t), imageWith(5), nil, false))
	if status.Code(r.err) != codes.Unimplemented || !strings.HasPrefix(r.err.Error(), "node watch: ") {
		t.Fatalf("err = %v, want the node watch's Unimplemented", r.err)
	}
}
