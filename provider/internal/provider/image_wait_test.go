package provider

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
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

func testNode(name string, ready, schedulable, cordoned bool) *apiv1.Node {
	cond := apiv1.ConditionFalse
	if ready {
		cond = apiv1.ConditionTrue
	}
	return &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Spec:     &apiv1.NodeSpec{Unschedulable: cordoned},
		Status: &apiv1.NodeStatus{
			Schedulable: schedulable,
			Conditions:  []*apiv1.Condition{{Type: apiv1.ConditionReady, Status: cond}},
		},
	}
}

func imageWith(rv int64, entries ...*apiv1.ImageNodeStatus) *apiv1.Image {
	for _, e := range entries {
		if e.ImageUid == "" {
			e.ImageUid = "uid-1"
		}
	}
	return &apiv1.Image{
		Metadata: &apiv1.ObjectMeta{Name: "debian.qcow2", Uid: "uid-1", ResourceVersion: rv},
		Spec:     &apiv1.ImageSpec{Url: "https://x/debian.qcow2", Nodes: "all"},
		Status:   &apiv1.ImageStatus{Nodes: entries},
	}
}

func entry(node, phase string) *apiv1.ImageNodeStatus {
	return &apiv1.ImageNodeStatus{Node: node, Phase: phase, Attempts: 1}
}

func nodeMap(nodes ...*apiv1.Node) map[string]*apiv1.Node {
	m := map[string]*apiv1.Node{}
	for _, n := range nodes {
		m[n.Metadata.Name] = n
	}
	return m
}

func TestJudgeImage(t *testing.T) {
	a, b := testNode("a", true, true, false), testNode("b", true, true, false)
	notReady, unschedulable, cordoned := testNode("c", false, true, false), testNode("d", true, false, false), testNode("e", true, true, true)
	pulling := entry("b", "Pulling")
	pulling.BytesDone, pulling.BytesTotal, pulling.BytesPerSecond, pulling.EtaSeconds, pulling.Attempts = 512<<20, 1<<30, 2<<20, 256, 2
	failed := entry("b", "Failed")
	failed.Message, failed.Attempts = "checksum mismatch: got 00aa, want 5da2", 3
	const wait, done, fail = "wait", "done", "fail"
	for _, c := range []struct {
		name    string
		img     *apiv1.Image
		nodes   map[string]*apiv1.Node
		want    string
		targets int
		says    string
	}{
		{"every node has it", imageWith(1, entry("a", "Ready"), entry("b", "Ready")), nodeMap(a, b), done, 2, "2 of 2"},
		{"one still pulling", imageWith(1, entry("a", "Ready"), pulling), nodeMap(a, b), wait, 2,
			"waiting for b (pulling: 50% of 1.0 GiB, 2.0 MiB/s, 4m16s left, attempt 2)"},
		{"one not started", imageWith(1, entry("a", "Ready")), nodeMap(a, b), wait, 2, "b (not started)"},
		{"one failed", imageWith(1, entry("a", "Ready"), failed), nodeMap(a, b), fail, 2,
			"node b could not pull it (attempt 3): checksum mismatch: got 00aa, want 5da2"},
		{"only ready, schedulable, uncordoned nodes count", imageWith(1, entry("a", "Ready")),
			nodeMap(a, notReady, unschedulable, cordoned), done, 1, "1 of 1"},
		{"a failure elsewhere is not waited on", imageWith(1, entry("a", "Ready"), func() *apiv1.ImageNodeStatus {
			f := proto.Clone(failed).(*apiv1.ImageNodeStatus)
			f.Node = "c"
			return f
		}()), nodeMap(a, notReady), done, 1, ""},
		{"an entry about an earlier image does not count", imageWith(1, &apiv1.ImageNodeStatus{Node: "a", Phase: "Ready", ImageUid: "uid-0"}),
			nodeMap(a), wait, 1, "a (not started)"},
		{"no node", imageWith(1), nodeMap(notReady), done, 0, "no ready, schedulable node"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := judgeImage(c.img, c.nodes)
			got := wait
			switch {
			case v.err != nil:
				got = fail
				var pe *imagePullError
				if !errors.As(v.err, &pe) || pe.node != "b" {
					t.Errorf("err %v is not b's imagePullError", v.err)
				}
			case v.done:
				got = done
			}
			if got != c.want || v.targets != c.targets {
				t.Fatalf("verdict %s with %d targets (err %v, state %q), want %s with %d", got, v.targets, v.err, v.state, c.want, c.targets)
			}
			if !strings.Contains(v.state, c.says) {
				t.Errorf("state %q does not say %q", v.state, c.says)
			}
		})
	}
}

// fakeImageWatch serves Watch from a script: each watch call takes events
// from the channel; a nil event fails the stream, as an agent restart
// would.
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
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case ev := <-f.events:
			if ev == nil {
				return status.Error(codes.Unavailable, "agent restarting")
			}
			if err := stream.Send(ev); err != nil {
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
	for {
		select {
		case <-stream.Context().Done():
			return nil
		case ev := <-f.events:
			if err := stream.Send(ev); err != nil {
				return err
			}
		}
	}
}

type waitResult struct {
	img *apiv1.Image
	v   imageVerdict
	err error
}

// startWait runs waitImage from start against the fakes.
func startWait(t *testing.T, ctx context.Context, start *apiv1.Image, nodes ...*apiv1.Node) (*fakeImageWatch, *fakeNodeWatch, <-chan waitResult) {
	return startWaitObserved(t, ctx, nil, start, nodes...)
}

func startWaitObserved(t *testing.T, ctx context.Context, onChange func(imageVerdict), start *apiv1.Image, nodes ...*apiv1.Node) (*fakeImageWatch, *fakeNodeWatch, <-chan waitResult) {
	t.Helper()
	old := watchReopenPause
	watchReopenPause = 10 * time.Millisecond
	t.Cleanup(func() { watchReopenPause = old })
	imgs := &fakeImageWatch{events: make(chan *apiv1.ImageEvent)}
	nw := &fakeNodeWatch{nodes: nodes, events: make(chan *apiv1.NodeEvent)}
	conn := testutil.ServeGRPC(t, func(s grpc.ServiceRegistrar) {
		apiv1.RegisterImagesServer(s, imgs)
		apiv1.RegisterNodesServer(s, nw)
	})
	c := client.New(conn)
	out := make(chan waitResult, 1)
	go func() {
		img, v, err := waitImage(ctx, c, start, onChange)
		out <- waitResult{img, v, err}
	}()
	return imgs, nw, out
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
		t.Fatal("waitImage did not return")
		return waitResult{}
	}
}

// The wait follows the Image from the version create returned, survives
// a failed watch (re-opened where it left off), and ends once every
// ready, schedulable node reports the image Ready.
func TestWaitImageUntilEveryNodeHasIt(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	imgs, _, out := startWait(t, ctx, imageWith(5),
		testNode("a", true, true, false), testNode("b", true, true, false), testNode("c", false, true, false))
	push(t, imgs.events, modified(imageWith(6, entry("a", "Ready"))))
	push(t, imgs.events, nil) // the stream fails
	push(t, imgs.events, modified(imageWith(7, entry("a", "Ready"), entry("b", "Pulling"))))
	push(t, imgs.events, modified(imageWith(8, entry("a", "Ready"), entry("b", "Ready"))))
	r := result(t, out)
	if r.err != nil || !r.v.done || r.img.GetMetadata().GetResourceVersion() != 8 || r.v.targets != 2 {
		t.Fatalf("waitImage = rv %d, %+v, %v; want done at rv 8 with 2 targets", r.img.GetMetadata().GetResourceVersion(), r.v, r.err)
	}
	opts := imgs.watchOptions()
	if len(opts) != 2 || opts[0].GetName() != "debian.qcow2" || opts[0].GetResourceVersion() != 5 || opts[1].GetResourceVersion() != 6 {
		t.Errorf("watches %v, want debian.qcow2 from rv 5, then again from rv 6", opts)
	}
}

// A node's failure ends the wait with its message, although the node
// reports Pulling again right after: the watch delivers every version.
func TestWaitImageFailsWithTheNodesMessage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	imgs, _, out := startWait(t, ctx, imageWith(5), testNode("a", true, true, false))
	failed := entry("a", "Failed")
	failed.Message = `image "debian.qcow2": checksum mismatch: the download has sha256 00aa, expected 5da2`
	push(t, imgs.events, modified(imageWith(6, failed)))
	r := result(t, out)
	var pe *imagePullError
	// Without the node's repetition of the image's name.
	if !errors.As(r.err, &pe) || pe.node != "a" || !strings.HasPrefix(pe.message, "checksum mismatch: the download") {
		t.Fatalf("waitImage err = %v, want a's checksum mismatch", r.err)
	}
	if r.img.GetMetadata().GetResourceVersion() != 6 {
		t.Errorf("returned rv %d, want the failed version 6", r.img.GetMetadata().GetResourceVersion())
	}
}

// A node that stops answering is no longer waited for.
func TestWaitImageNodeLeavingEndsTheWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	imgs, nodes, out := startWait(t, ctx, imageWith(5), testNode("a", true, true, false), testNode("b", true, true, false))
	push(t, imgs.events, modified(imageWith(6, entry("a", "Ready"))))
	push(t, nodes.events, &apiv1.NodeEvent{Type: apiv1.EventType_MODIFIED, Object: testNode("b", false, true, false)})
	r := result(t, out)
	if r.err != nil || !r.v.done || r.v.targets != 1 {
		t.Fatalf("waitImage = %+v, %v; want done with one target", r.v, r.err)
	}
}

func TestWaitImageDeleted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	imgs, _, out := startWait(t, ctx, imageWith(5), testNode("a", true, true, false))
	push(t, imgs.events, &apiv1.ImageEvent{Type: apiv1.EventType_DELETED, Object: imageWith(6), ResourceVersion: 6})
	if r := result(t, out); status.Code(r.err) != codes.NotFound {
		t.Fatalf("waitImage err = %v, want NotFound", r.err)
	}

	// Re-created under the same name meanwhile: not the image waited for.
	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	imgs, _, out = startWait(t, ctx2, imageWith(5), testNode("a", true, true, false))
	other := imageWith(9, entry("a", "Ready"))
	other.Metadata.Uid = "uid-other"
	push(t, imgs.events, &apiv1.ImageEvent{Type: apiv1.EventType_RESET})
	push(t, imgs.events, &apiv1.ImageEvent{Type: apiv1.EventType_ADDED, Object: other, ResourceVersion: 9})
	if r := result(t, out); status.Code(r.err) != codes.NotFound {
		t.Fatalf("waitImage err = %v after a re-create, want NotFound", r.err)
	}
}

// A timeout says who is still pulling, and how far.
func TestWaitImageTimeoutSaysWho(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := make(chan string, 10)
	imgs, _, out := startWaitObserved(t, ctx, func(v imageVerdict) { seen <- v.state }, imageWith(5),
		testNode("a", true, true, false), testNode("b", true, true, false))
	pulling := entry("b", "Pulling")
	pulling.BytesDone, pulling.BytesTotal = 512, 1024
	push(t, imgs.events, modified(imageWith(6, entry("a", "Ready"), pulling)))
	for s := range seen {
		if strings.Contains(s, "pulling") {
			break
		}
	}
	cancel()
	r := result(t, out)
	if !errors.Is(r.err, errWaitTimeout) {
		t.Fatalf("err = %v, want a timeout", r.err)
	}
	if !strings.Contains(r.err.Error(), "1 of 2 nodes have it; waiting for b (pulling: 50% of 1.0 KiB)") {
		t.Errorf("timeout %q does not say who is pulling", r.err)
	}
}
