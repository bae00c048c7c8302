package command

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// fakeImages is an in-memory Images service: the agent's validation,
// resource versions, and watches by name from a version on.
type fakeImages struct {
	apiv1.UnimplementedImagesServer
	fakeFeed[*apiv1.ImageEvent]

	images map[string]*apiv1.Image
	inUse  map[string]string // name -> user, refused deletes
}

func newFakeImages() *fakeImages {
	return &fakeImages{images: map[string]*apiv1.Image{}, inUse: map[string]string{}}
}

// store writes img with a new version and tells the watchers; callers
// hold mu.
func (f *fakeImages) store(typ apiv1.EventType, img *apiv1.Image) *apiv1.Image {
	f.rv++
	img = proto.Clone(img).(*apiv1.Image)
	img.Metadata.ResourceVersion = f.rv
	if typ == apiv1.EventType_DELETED {
		delete(f.images, img.Metadata.Name)
	} else {
		f.images[img.Metadata.Name] = img
	}
	f.publish(func() *apiv1.ImageEvent {
		return &apiv1.ImageEvent{Type: typ, Object: proto.Clone(img).(*apiv1.Image), ResourceVersion: f.rv}
	})
	return proto.Clone(img).(*apiv1.Image)
}

func (f *fakeImages) Create(_ context.Context, req *apiv1.CreateImageRequest) (*apiv1.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	img := proto.Clone(req.GetImage()).(*apiv1.Image)
	validation.DefaultImage(img)
	if errs := validation.ValidateImage(img); len(errs) > 0 {
		return nil, validation.ToStatusError("Image", img.GetMetadata().GetName(), errs)
	}
	if _, ok := f.images[img.Metadata.Name]; ok {
		return nil, status.Errorf(codes.AlreadyExists, "image %q already exists", img.Metadata.Name)
	}
	img.Metadata.Uid = fmt.Sprintf("uid-%d", f.rv+1)
	img.Metadata.CreationTimestamp = timestamppb.New(time.Now().Add(-2 * time.Hour))
	img.Status = &apiv1.ImageStatus{}
	return f.store(apiv1.EventType_ADDED, img), nil
}

// put stores img as it is, bypassing validation (a URL with a password).
func (f *fakeImages) put(img *apiv1.Image) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.store(apiv1.EventType_ADDED, img)
}

// report replaces node's entry in the status of image name.
func (f *fakeImages) report(name string, st *apiv1.ImageNodeStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	img := proto.Clone(f.images[name]).(*apiv1.Image)
	st.ImageUid = img.Metadata.Uid
	var nodes []*apiv1.ImageNodeStatus
	for _, e := range img.Status.GetNodes() {
		if e.Node != st.Node {
			nodes = append(nodes, e)
		}
	}
	img.Status = &apiv1.ImageStatus{Nodes: append(nodes, st)}
	f.store(apiv1.EventType_MODIFIED, img)
}

func (f *fakeImages) get(name string) *apiv1.Image {
	f.mu.Lock()
	defer f.mu.Unlock()
	if img, ok := f.images[name]; ok {
		return proto.Clone(img).(*apiv1.Image)
	}
	return nil
}

func (f *fakeImages) Get(_ context.Context, req *apiv1.GetImageRequest) (*apiv1.Image, error) {
	if img := f.get(req.GetName()); img != nil {
		return img, nil
	}
	return nil, status.Errorf(codes.NotFound, "image %q not found", req.GetName())
}

func (f *fakeImages) List(context.Context, *apiv1.ListImagesRequest) (*apiv1.ListImagesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &apiv1.ListImagesResponse{ResourceVersion: f.rv}
	for _, k := range sortedKeys(f.images) {
		resp.Items = append(resp.Items, proto.Clone(f.images[k]).(*apiv1.Image))
	}
	return resp, nil
}

func (f *fakeImages) Delete(_ context.Context, req *apiv1.DeleteImageRequest) (*apiv1.Image, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	img, ok := f.images[req.GetName()]
	switch {
	case !ok:
		return nil, status.Errorf(codes.NotFound, "image %q not found", req.GetName())
	case f.inUse[req.GetName()] != "":
		return nil, status.Errorf(codes.FailedPrecondition, "image %q is in use by %s: delete or change them first", req.GetName(), f.inUse[req.GetName()])
	}
	return f.store(apiv1.EventType_DELETED, img), nil
}

// Watch sends what changed after the requested version (a version 0
// lists first); a fake keeps no history, so the test must not change the
// image between the create and the watch.
func (f *fakeImages) Watch(req *apiv1.WatchImagesRequest, stream grpc.ServerStreamingServer[apiv1.ImageEvent]) error {
	opts := req.GetOptions()
	list := func() []*apiv1.ImageEvent {
		if opts.GetResourceVersion() != 0 {
			return nil
		}
		var initial []*apiv1.ImageEvent
		for _, k := range sortedKeys(f.images) {
			if opts.GetName() == "" || k == opts.GetName() {
				initial = append(initial, &apiv1.ImageEvent{Type: apiv1.EventType_ADDED, Object: proto.Clone(f.images[k]).(*apiv1.Image)})
			}
		}
		return append(initial, &apiv1.ImageEvent{Type: apiv1.EventType_SYNCED, ResourceVersion: f.rv})
	}
	keep := func(ev *apiv1.ImageEvent) bool {
		return opts.GetName() == "" || ev.GetObject().GetMetadata().GetName() == opts.GetName()
	}
	return f.serveWatch(stream.Context(), list, keep, stream.Send)
}

// fakeImageNodes lists and watches a fixed set of nodes.
type fakeImageNodes struct {
	apiv1.UnimplementedNodesServer
	nodes []*apiv1.Node
}

func (f fakeImageNodes) List(context.Context, *apiv1.ListNodesRequest) (*apiv1.ListNodesResponse, error) {
	return &apiv1.ListNodesResponse{Items: f.nodes}, nil
}

func (f fakeImageNodes) Watch(_ *apiv1.WatchNodesRequest, stream grpc.ServerStreamingServer[apiv1.NodeEvent]) error {
	for _, n := range f.nodes {
		if err := stream.Send(&apiv1.NodeEvent{Type: apiv1.EventType_ADDED, Object: n}); err != nil {
			return err
		}
	}
	if err := stream.Send(&apiv1.NodeEvent{Type: apiv1.EventType_SYNCED}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

func imageTestNode(name string, ready bool) *apiv1.Node {
	cond := apiv1.ConditionFalse
	if ready {
		cond = apiv1.ConditionTrue
	}
	return &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Status:   &apiv1.NodeStatus{Schedulable: true, Conditions: []*apiv1.Condition{{Type: apiv1.ConditionReady, Status: cond}}},
	}
}

// startImageFake serves Images and nodes node-a and node-b (ready) and
// node-c (not ready).
func startImageFake(t *testing.T) (*fakeImages, string) {
	t.Helper()
	return startImageFakeNodes(t, imageTestNode("node-a", true), imageTestNode("node-b", true), imageTestNode("node-c", false))
}

func startImageFakeNodes(t *testing.T, list ...*apiv1.Node) (*fakeImages, string) {
	t.Helper()
	imgs := newFakeImages()
	nodes := fakeImageNodes{nodes: list}
	return imgs, serveUnix(t, func(srv *grpc.Server) {
		apiv1.RegisterImagesServer(srv, imgs)
		apiv1.RegisterNodesServer(srv, nodes)
	})
}

const (
	testURL = "https://images.example/debian-12.qcow2"
	testSum = "5da2a6f8e7b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5"
)

func TestImageCreateGetDelete(t *testing.T) {
	fake, ep := startImageFake(t)
	out := mustRun(t, ep, "image", "create", "debian-12.qcow2", "--url", testURL, "--sha256", strings.ToUpper(testSum),
		"--label", "os=debian", "--nodes", "all", "--max-size", "20Gi")
	if out != "image/debian-12.qcow2 created\n" {
		t.Errorf("create printed %q", out)
	}
	img := fake.get("debian-12.qcow2")
	want := &apiv1.ImageSpec{Url: testURL, Sha256: testSum, Nodes: "all", MaxSize: "20Gi"}
	if !proto.Equal(img.GetSpec(), want) || img.GetMetadata().GetLabels()["os"] != "debian" {
		t.Errorf("stored %v", img)
	}

	// Invalid input names the field.
	_, _, err := run(t, ep, "image", "create", "bad.qcow2", "--url", "ftp://x/y", "--sha256", "abc")
	for _, w := range []string{`Image "bad.qcow2" is invalid:`, "spec.url.scheme:", "spec.sha256:"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("invalid create: %v, want it to say %q", err, w)
		}
	}
	if _, _, err := run(t, ep, "image", "create", "x.qcow2"); err == nil || !strings.Contains(err.Error(), `"url" not set`) {
		t.Errorf("create without --url: %v", err)
	}
	if _, _, err := run(t, ep, "image", "create", "x.qcow2", "--url", testURL, "--wait"); err == nil || !strings.Contains(err.Error(), "--wait needs --nodes all") {
		t.Errorf("--wait without --nodes all: %v", err)
	}

	// node-a has it, node-b is pulling: 1 of the 2 ready nodes so far.
	fake.report("debian-12.qcow2", &apiv1.ImageNodeStatus{Node: "node-a", Phase: "Ready", SizeBytes: 300 << 20, Sha256: testSum})
	fake.report("debian-12.qcow2", &apiv1.ImageNodeStatus{Node: "node-b", Phase: "Pulling", BytesDone: 1 << 20, BytesTotal: 300 << 20})
	// On demand, pulled by nobody yet; its URL's password is never shown.
	fake.put(&apiv1.Image{
		Metadata: &apiv1.ObjectMeta{Name: "alpine.raw", Uid: "u2", CreationTimestamp: timestamppb.New(time.Now().Add(-30 * time.Minute))},
		Spec:     &apiv1.ImageSpec{Url: "https://user:secret@mirror.example/alpine.raw"},
	})
	got := mustRun(t, ep, "image", "get")
	lines := strings.Split(got, "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[0], "NAME ") || strings.Contains(got, "secret") {
		t.Fatalf("image get:\n%s", got)
	}
	for i, w := range [][]string{
		{"alpine.raw", "https://user:xxxxx@mirror.example/alpine.raw", "on-demand", "<none>", "30m"},
		{"debian-12.qcow2", testURL, "1/2", "Ready", "300Mi", "120m"},
	} {
		if f := strings.Fields(lines[i+1]); strings.Join(f, " ") != strings.Join(w, " ") {
			t.Errorf("row %d = %q, want %q (table:\n%s)", i+1, f, w, got)
		}
	}
	// The generic get knows images too.
	if out := mustRun(t, ep, "get", "images"); out != got {
		t.Errorf("get images:\n%s\nimage get:\n%s", out, got)
	}
	if out := mustRun(t, ep, "get", "image", "debian-12.qcow2", "-o", "yaml"); !strings.Contains(out, "kind: Image\n") ||
		!strings.Contains(out, "sha256: "+testSum) || !strings.Contains(out, "phase: Pulling") {
		t.Errorf("get image -o yaml:\n%s", out)
	}
	if out := mustRun(t, ep, "image", "get", "-o", "json"); !strings.Contains(out, `"kind": "List"`) || !strings.Contains(out, `"name": "alpine.raw"`) {
		t.Errorf("image get -o json:\n%s", out)
	}
	if _, _, err := run(t, ep, "image", "get", "nope.qcow2"); err == nil || err.Error() != `image "nope.qcow2" not found` {
		t.Errorf("get of a missing image: %v", err)
	}

	// In use: the agent's refusal, as it says it.
	fake.locked(func() { fake.inUse["debian-12.qcow2"] = "vm default/web" })
	if _, _, err := run(t, ep, "image", "delete", "debian-12.qcow2"); err == nil ||
		err.Error() != `image "debian-12.qcow2" is in use by vm default/web: delete or change them first` {
		t.Errorf("delete of an image in use: %v", err)
	}
	fake.locked(func() { delete(fake.inUse, "debian-12.qcow2") })
	if out := mustRun(t, ep, "image", "delete", "debian-12.qcow2"); out != "image \"debian-12.qcow2\" deleted\n" {
		t.Errorf("image delete printed %q", out)
	}
	if out := mustRun(t, ep, "delete", "image", "alpine.raw"); out != "image \"alpine.raw\" deleted\n" {
		t.Errorf("delete image printed %q", out)
	}
	if fake.get("alpine.raw") != nil || fake.get("debian-12.qcow2") != nil {
		t.Error("images left after delete")
	}
}

// startCreateWait runs image create --wait in the background; the test
// reports the nodes' pulls once the command watches.
func startCreateWait(t *testing.T, extra ...string) (fake *fakeImages, stdout, stderr *testutil.SyncBuffer, done <-chan error) {
	t.Helper()
	fake, ep := startImageFake(t)
	stdout, stderr = &testutil.SyncBuffer{}, &testutil.SyncBuffer{}
	ch := make(chan error, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	args := append([]string{"image", "create", "debian-12.qcow2", "--url", testURL, "--nodes", "all", "--wait"}, extra...)
	go func() { ch <- runCmd(ctx, ep, "", stdout, stderr, args...) }()
	testutil.Eventually(t, 10*time.Second, "the command to watch the image", func() bool { return fake.watchers() > 0 })
	return fake, stdout, stderr, ch
}

func waitDone(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("image create --wait did not return")
		return nil
	}
}

// --wait follows the pulls (plain lines, not a terminal) and returns once
// both ready nodes have the image; the node that is not ready is not
// waited for.
func TestImageCreateWait(t *testing.T) {
	fake, stdout, stderr, done := startCreateWait(t)
	// Each report after the command has printed the one before: it shows
	// the state it sees, and two writes that land before it looks are
	// one state (the test failed so under load).
	printed := func(line string) {
		t.Helper()
		testutil.Eventually(t, 10*time.Second, "the command to print "+line, func() bool { return strings.Contains(stderr.String(), line) })
	}
	printed("node-b: waiting to start\n")
	fake.report("debian-12.qcow2", &apiv1.ImageNodeStatus{Node: "node-a", Phase: "Pulling", BytesDone: 150 << 20, BytesTotal: 300 << 20, BytesPerSecond: 10 << 20, EtaSeconds: 15})
	printed("node-a: Pulling (50% of 300.0 MiB, 10.0 MiB/s, 15s left)\n")
	fake.report("debian-12.qcow2", &apiv1.ImageNodeStatus{Node: "node-a", Phase: "Ready", SizeBytes: 300 << 20, Sha256: testSum})
	printed("node-a: Ready 300.0 MiB")
	select {
	case err := <-done:
		t.Fatalf("returned with node-b still to go: %v", err)
	default:
	}
	fake.report("debian-12.qcow2", &apiv1.ImageNodeStatus{Node: "node-b", Phase: "Ready", SizeBytes: 300 << 20, Sha256: testSum})
	if err := waitDone(t, done); err != nil {
		t.Fatalf("create --wait: %v\n%s", err, stderr)
	}
	if got := stdout.String(); got != "image/debian-12.qcow2 created\nimage/debian-12.qcow2 ready on 2 of 2 nodes\n" {
		t.Errorf("stdout %q", got)
	}
	for _, w := range []string{
		"node-a: waiting to start\n", "node-b: waiting to start\n",
		"node-a: Pulling (50% of 300.0 MiB, 10.0 MiB/s, 15s left)\n",
		"node-a: Ready 300.0 MiB, sha256 " + testSum[:12] + "\n",
		"node-b: Ready 300.0 MiB",
	} {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("progress lacks %q:\n%s", w, stderr)
		}
	}
	if strings.Contains(stderr.String(), "node-c") || strings.Contains(stderr.String(), "\x1b[") {
		t.Errorf("progress shows the node that is not ready, or terminal escapes:\n%s", stderr)
	}
}

// A node's failure ends --wait with the node's reason.
func TestImageCreateWaitFails(t *testing.T) {
	fake, _, _, done := startCreateWait(t)
	fake.report("debian-12.qcow2", &apiv1.ImageNodeStatus{Node: "node-b", Phase: "Failed", Attempts: 1,
		Message: `image "debian-12.qcow2": checksum mismatch: the download has sha256 1b7a, expected 5da2`})
	err := waitDone(t, done)
	if err == nil || !strings.HasPrefix(err.Error(), `node node-b could not pull image "debian-12.qcow2" (attempt 1): checksum mismatch: the download`) {
		t.Fatalf("create --wait: %v", err)
	}
}

// startGetWatch creates Image debian-12.qcow2 and runs image get -w on
// it in the background, until cancel; done has its result.
func startGetWatch(t *testing.T) (fake *fakeImages, ep string, stderr *testutil.SyncBuffer, cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	fake, ep = startImageFake(t)
	mustRun(t, ep, "image", "create", "debian-12.qcow2", "--url", testURL, "--nodes", "all")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	stderr = &testutil.SyncBuffer{}
	ch := make(chan error, 1)
	go func() {
		ch <- runCmd(ctx, ep, "", &testutil.SyncBuffer{}, stderr, "image", "get", "debian-12.qcow2", "-w")
	}()
	testutil.Eventually(t, 10*time.Second, "the command to watch the image", func() bool { return fake.watchers() > 0 })
	return fake, ep, stderr, cancel, ch
}

// image get NAME -w follows the pulls until interrupted, which is no
// error.
func TestImageGetWatchFollowsPulls(t *testing.T) {
	fake, _, stderr, cancel, done := startGetWatch(t)
	fake.report("debian-12.qcow2", &apiv1.ImageNodeStatus{Node: "node-a", Phase: "Pulling"})
	fake.report("debian-12.qcow2", &apiv1.ImageNodeStatus{Node: "node-a", Phase: "Ready", SizeBytes: 1 << 20})
	fake.report("debian-12.qcow2", &apiv1.ImageNodeStatus{Node: "node-b", Phase: "Ready", SizeBytes: 1 << 20})
	testutil.Eventually(t, 10*time.Second, "node-b's pull to show", func() bool {
		return strings.Contains(stderr.String(), "node-b: Ready 1.0 MiB")
	})
	// Every node has it, and the view still follows.
	select {
	case err := <-done:
		t.Fatalf("get -w returned by itself: %v", err)
	default:
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("interrupted get -w: %v", err)
	}
	for _, w := range []string{"node-a: Pulling (connecting)\n", "node-a: Ready 1.0 MiB\n"} {
		if !strings.Contains(stderr.String(), w) {
			t.Errorf("get -w lacks %q:\n%s", w, stderr.String())
		}
	}
}

// image get NAME -w ends when the Image is deleted, saying so.
func TestImageGetWatchEndsOnDelete(t *testing.T) {
	_, ep, _, _, done := startGetWatch(t)
	mustRun(t, ep, "image", "delete", "debian-12.qcow2")
	select {
	case err := <-done:
		if err == nil || err.Error() != `image "debian-12.qcow2" was deleted` {
			t.Fatalf("get -w of a deleted image: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("get -w did not end when the image was deleted")
	}
}

// With no ready, schedulable node there is nothing to wait for, and
// --wait says so rather than "ready on 0 of 0 nodes".
func TestImageCreateWaitWithoutNodes(t *testing.T) {
	_, ep := startImageFakeNodes(t, imageTestNode("node-c", false))
	out := mustRun(t, ep, "image", "create", "debian-12.qcow2", "--url", testURL, "--nodes", "all", "--wait")
	if want := "image/debian-12.qcow2 created\nimage/debian-12.qcow2: no node is ready and schedulable, nothing to wait for; " +
		"nodes pull it when they become ready\n"; out != want {
		t.Errorf("create --wait without nodes printed %q, want %q", out, want)
	}
}

func TestImageCreateWaitTimesOut(t *testing.T) {
	fake, _, _, done := startCreateWait(t, "--timeout", "1s")
	fake.report("debian-12.qcow2", &apiv1.ImageNodeStatus{Node: "node-a", Phase: "Ready"})
	err := waitDone(t, done)
	if err == nil || !strings.Contains(err.Error(), "timed out after 1s waiting for the nodes to pull image") ||
		!strings.Contains(err.Error(), "1 of 2 nodes have it; waiting for node-b (not started)") {
		t.Fatalf("create --wait --timeout 1s: %v", err)
	}
}

func pullImage(entries ...*apiv1.ImageNodeStatus) *apiv1.Image {
	return &apiv1.Image{Metadata: &apiv1.ObjectMeta{Name: "debian.qcow2", Uid: "u1"}, Status: &apiv1.ImageStatus{Nodes: entries}}
}

// On a terminal each node has a bar that is redrawn in place.
func TestPullViewTerminal(t *testing.T) {
	var b strings.Builder
	v := newPullView(&b, true, time.Now)
	targets := []string{"node-a", "node-bb"}
	if err := v.show(pullImage(&apiv1.ImageNodeStatus{Node: "node-a", Phase: "Pulling", BytesDone: 25, BytesTotal: 100}), targets); err != nil {
		t.Fatal(err)
	}
	first := "" +
		"\r\x1b[2Knode-a   [######..................]  Pulling (25% of 100 B)\n" +
		"\r\x1b[2Knode-bb  [........................]  waiting to start\n"
	if b.String() != first {
		t.Fatalf("first drawing %q, want %q", b.String(), first)
	}
	b.Reset()
	// Nothing changed: nothing drawn.
	if err := v.show(pullImage(&apiv1.ImageNodeStatus{Node: "node-a", Phase: "Pulling", BytesDone: 25, BytesTotal: 100}), targets); err != nil || b.Len() != 0 {
		t.Fatalf("an unchanged view drew %q (%v)", b.String(), err)
	}
	if err := v.show(pullImage(&apiv1.ImageNodeStatus{Node: "node-a", Phase: "Ready", SizeBytes: 100},
		&apiv1.ImageNodeStatus{Node: "node-bb", Phase: "Failed", Attempts: 2, Message: "connection refused"}), targets); err != nil {
		t.Fatal(err)
	}
	second := "\x1b[2A" +
		"\r\x1b[2Knode-a   [########################]  Ready 100 B\n" +
		"\r\x1b[2Knode-bb  [........................]  Failed (attempt 2): connection refused\n"
	if b.String() != second {
		t.Fatalf("redrawing %q, want %q", b.String(), second)
	}
}

// Elsewhere a node's progress is printed at most every plainInterval,
// a change of phase at once.
func TestPullViewPlainLinesAreRateLimited(t *testing.T) {
	var b strings.Builder
	now := time.Unix(1000, 0)
	v := newPullView(&b, false, func() time.Time { return now })
	pulling := func(done int64) *apiv1.Image {
		return pullImage(&apiv1.ImageNodeStatus{Node: "node-a", Phase: "Pulling", BytesDone: done, BytesTotal: 100})
	}
	step := func(d time.Duration, img *apiv1.Image) string {
		now = now.Add(d)
		b.Reset()
		if err := v.show(img, []string{"node-a"}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if got := step(0, pulling(10)); got != "node-a: Pulling (10% of 100 B)\n" {
		t.Errorf("first: %q", got)
	}
	if got := step(time.Second, pulling(20)); got != "" {
		t.Errorf("1s later: %q, want nothing", got)
	}
	if got := step(plainInterval, pulling(60)); got != "node-a: Pulling (60% of 100 B)\n" {
		t.Errorf("after the interval: %q", got)
	}
	if got := step(time.Second, pullImage(&apiv1.ImageNodeStatus{Node: "node-a", Phase: "Ready", SizeBytes: 100})); got != "node-a: Ready 100 B\n" {
		t.Errorf("phase change: %q", got)
	}
	if got := step(time.Minute, pullImage(&apiv1.ImageNodeStatus{Node: "node-a", Phase: "Ready", SizeBytes: 100})); got != "" {
		t.Errorf("unchanged: %q", got)
	}
}

func TestImageNodesCell(t *testing.T) {
	nodes := []*apiv1.Node{imageTestNode("a", true), imageTestNode("b", true), imageTestNode("c", false)}
	all := func(entries ...*apiv1.ImageNodeStatus) *apiv1.Image {
		img := pullImage(entries...)
		img.Spec = &apiv1.ImageSpec{Nodes: "all"}
		return img
	}
	for _, c := range []struct {
		img  *apiv1.Image
		want string
	}{
		{all(), "0/2 Ready"},
		{all(&apiv1.ImageNodeStatus{Node: "a", Phase: "Ready"}), "1/2 Ready"},
		{all(&apiv1.ImageNodeStatus{Node: "a", Phase: "Ready"}, &apiv1.ImageNodeStatus{Node: "b", Phase: "Failed"},
			&apiv1.ImageNodeStatus{Node: "c", Phase: "Ready"}), "2/3 Ready,1 Failed"},
		{pullImage(), "on-demand"},
		{pullImage(&apiv1.ImageNodeStatus{Node: "c", Phase: "Ready"}), "1/1 Ready"},
		// An entry about an earlier Image of the same name does not count.
		{pullImage(&apiv1.ImageNodeStatus{Node: "c", Phase: "Ready", ImageUid: "u0"}), "on-demand"},
	} {
		if got := imageNodesCell(c.img, nodes); got != c.want {
			t.Errorf("imageNodesCell(%v) = %q, want %q", c.img.GetStatus(), got, c.want)
		}
	}
}
