package nodeagent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagestore"
)

func needQemuImg(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed (Debian package qemu-utils)")
	}
}

func writeImage(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func imageNames(l *apiv1.NodeImageList) string {
	var names []string
	for _, img := range l.GetItems() {
		names = append(names, img.GetName())
	}
	return strings.Join(names, " ")
}

// The refresher lists the directory with imagestore, reports what a VMI
// can use, and lists again only when a file changed.
func TestImageRefresh(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	kernel := []byte("not really a kernel, but qemu-img calls it raw")
	writeImage(t, filepath.Join(dir, "boot", "vmlinuz"), kernel)
	writeImage(t, filepath.Join(dir, "disk.raw"), make([]byte, 1<<20))
	writeImage(t, filepath.Join(dir, ".hidden"), []byte("x"))
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", filepath.Join(dir, "base.qcow2"), "64M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v\n%s", err, out)
	}
	// An overlay dropped in by hand: it needs another file, so no VMI can
	// use it as a base.
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-b", filepath.Join(dir, "base.qcow2"), "-F", "qcow2",
		filepath.Join(dir, "overlay.qcow2")).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v\n%s", err, out)
	}

	a := &Agent{opts: Options{ImageDir: dir}, log: testLogger(t), images: newImageInventory()}
	s, err := imagestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	lists := 0
	r := imageRefresher{a: a, store: s, list: func(ctx context.Context) ([]imagestore.Image, error) {
		lists++
		return s.List(ctx)
	}}
	ctx := context.Background()

	if a.images.pending() != nil {
		t.Fatal("pending before any listing")
	}
	r.refresh(ctx)
	l := a.images.pending()
	if got := imageNames(l); got != "base.qcow2 boot/vmlinuz disk.raw" {
		t.Fatalf("listed %q", got)
	}
	// qemu-img rounds a raw file up to whole 512-byte sectors.
	want := []*apiv1.NodeImage{
		{Name: "boot/vmlinuz", Format: "raw", VirtualSizeBytes: 512, SizeBytes: int64(len(kernel)), Sha256: sha256Hex(kernel)},
		{Name: "disk.raw", Format: "raw", VirtualSizeBytes: 1 << 20, SizeBytes: 1 << 20, Sha256: sha256Hex(make([]byte, 1<<20))},
	}
	for i, w := range want {
		if got := l.Items[i+1]; !proto.Equal(got, w) {
			t.Errorf("image %d = %v, want %v", i+1, got, w)
		}
	}
	if q := l.Items[0]; q.Format != "qcow2" || q.VirtualSizeBytes != 64<<20 || len(q.Sha256) != 64 {
		t.Errorf("qcow2 image = %v", q)
	}
	select {
	case <-a.images.listed:
	default:
		t.Error("registration would still wait after the first listing")
	}

	// Sent once: nothing pending until something changes.
	a.images.markSent(l)
	if p := a.images.pending(); p != nil {
		t.Fatalf("pending after sending: %v", p)
	}
	r.refresh(ctx)
	if lists != 1 {
		t.Fatalf("unchanged directory listed again (%d listings)", lists)
	}

	// A file replaced by rename with one of the same size and
	// modification time is noticed too.
	p := filepath.Join(dir, "disk.raw")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	changed := make([]byte, 1<<20)
	changed[0] = 1
	writeImage(t, p+".new", changed)
	if err := os.Chtimes(p+".new", fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".new", p); err != nil {
		t.Fatal(err)
	}
	r.refresh(ctx)
	l2 := a.images.pending()
	if lists != 2 || l2 == nil || l2.Items[2].Sha256 != sha256Hex(changed) {
		t.Fatalf("after rewrite: %d listings, pending %v", lists, l2)
	}
	a.images.markSent(l2)

	// A listing equal to the sent one is not pending.
	writeImage(t, filepath.Join(dir, "new.raw"), make([]byte, 4096))
	r.refresh(ctx)
	if lists != 3 || imageNames(a.images.pending()) != "base.qcow2 boot/vmlinuz disk.raw new.raw" {
		t.Fatalf("after adding: %d listings, pending %q", lists, imageNames(a.images.pending()))
	}
	if err := os.Remove(filepath.Join(dir, "new.raw")); err != nil {
		t.Fatal(err)
	}
	r.refresh(ctx)
	if p := a.images.pending(); lists != 4 || p != nil {
		t.Fatalf("after removing again: %d listings, pending %v", lists, p)
	}
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
	writeImage(t, filepath.Join(h.imageDir, "disk.raw"), make([]byte, 8192))
	h.runAgent(func(o *Options) { o.ImageRefreshPeriod = 50 * time.Millisecond })
	storedImages := func() string {
		n, err := h.stores.Nodes.Get(h.ctx, "", testNode)
		if err != nil {
			return ""
		}
		return imageNames(&apiv1.NodeImageList{Items: n.GetStatus().GetImages()})
	}
	h.eventually("node registered with its image", func() bool { return storedImages() == "disk.raw" })
	rec.mu.Lock()
	registered := rec.registered
	rec.mu.Unlock()
	if len(registered) != 1 || registered[0].GetSha256() != sha256Hex(make([]byte, 8192)) {
		t.Errorf("registered with %v", registered)
	}
	h.eventually("first heartbeat", func() bool { _, n := rec.withImages(); return n >= 1 })

	writeImage(t, filepath.Join(h.imageDir, "vmlinuz"), []byte("kernel"))
	h.eventually("new image stored long before the next regular heartbeat", func() bool { return storedImages() == "disk.raw vmlinuz" })
	time.Sleep(10 * 50 * time.Millisecond) // ten refresh periods with nothing new
	sent, beats := rec.withImages()
	if beats != 2 || len(sent) != 1 || imageNames(sent[0]) != "disk.raw vmlinuz" {
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
	h.eventually("registered", func() bool {
		_, err := h.stores.Nodes.Get(h.ctx, "", testNode)
		return err == nil
	})
	if took := time.Since(start); took > registerImageWait+3*time.Second {
		t.Errorf("registration took %v while hashing", took)
	}
	h.eventually("three heartbeats while hashing", func() bool { _, n := rec.withImages(); return n >= 3 })
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
