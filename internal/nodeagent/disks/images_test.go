package disks

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clocktesting "k8s.io/utils/clock/testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks/diskstest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// testTimeout bounds a wait for a goroutine of the test: generous, for a
// loaded machine under -race.
const testTimeout = 30 * time.Second

// signalled reports whether inv has woken the heartbeat loop since the
// last call.
func signalled(inv *Inventory) bool {
	select {
	case <-inv.Changed():
		return true
	default:
		return false
	}
}

// The refresher lists the directory with imagestore, reports what a VMI
// can use, and lists again only when a file changed.
func TestImageRefresh(t *testing.T) {
	diskstest.NeedQemuImg(t)
	dir := t.TempDir()
	kernel := []byte("not really a kernel, but qemu-img calls it raw")
	diskstest.WriteFile(t, filepath.Join(dir, "boot", "vmlinuz"), kernel)
	diskstest.WriteFile(t, filepath.Join(dir, "disk.raw"), make([]byte, 1<<20))
	diskstest.WriteFile(t, filepath.Join(dir, ".hidden"), []byte("x"))
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", filepath.Join(dir, "base.qcow2"), "64M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v\n%s", err, out)
	}
	// An overlay dropped in by hand: it needs another file, so no VMI can
	// use it as a base.
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-b", filepath.Join(dir, "base.qcow2"), "-F", "qcow2",
		filepath.Join(dir, "overlay.qcow2")).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v\n%s", err, out)
	}

	inv := NewInventory(InventoryOptions{ImageDir: dir, Logger: slog.New(slog.DiscardHandler)})
	s, err := imagestore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	lists := 0
	r := refresher{inv: inv, store: s, list: func(ctx context.Context) ([]imagestore.Image, error) {
		lists++
		return s.List(ctx)
	}}
	ctx := context.Background()

	if inv.Pending() != nil {
		t.Fatal("pending before any listing")
	}
	r.refresh(ctx)
	l := inv.Pending()
	if got := diskstest.ImageNames(l.GetItems()); got != "base.qcow2 boot/vmlinuz disk.raw" {
		t.Fatalf("listed %q", got)
	}
	if !signalled(inv) {
		t.Error("a new list did not wake the heartbeat loop")
	}
	// qemu-img rounds a raw file up to whole 512-byte sectors.
	want := []*apiv1.NodeImage{
		{Name: "boot/vmlinuz", Format: "raw", VirtualSizeBytes: 512, SizeBytes: int64(len(kernel)), Sha256: diskstest.SHA256(kernel)},
		{Name: "disk.raw", Format: "raw", VirtualSizeBytes: 1 << 20, SizeBytes: 1 << 20, Sha256: diskstest.SHA256(make([]byte, 1<<20))},
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
	case <-inv.FirstTried():
	default:
		t.Error("registration would still wait after the first listing")
	}

	// Sent once: nothing pending until something changes.
	inv.MarkSent(l)
	if p := inv.Pending(); p != nil {
		t.Fatalf("pending after sending: %v", p)
	}
	r.refresh(ctx)
	if lists != 1 {
		t.Fatalf("unchanged directory listed again (%d listings)", lists)
	}
	if signalled(inv) {
		t.Error("an unchanged directory woke the heartbeat loop")
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
	diskstest.WriteFile(t, p+".new", changed)
	if err := os.Chtimes(p+".new", fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p+".new", p); err != nil {
		t.Fatal(err)
	}
	r.refresh(ctx)
	l2 := inv.Pending()
	if lists != 2 || l2 == nil || l2.Items[2].Sha256 != diskstest.SHA256(changed) {
		t.Fatalf("after rewrite: %d listings, pending %v", lists, l2)
	}
	if !signalled(inv) {
		t.Error("a rewritten image did not wake the heartbeat loop")
	}
	inv.MarkSent(l2)

	// A listing equal to the sent one is not pending.
	diskstest.WriteFile(t, filepath.Join(dir, "new.raw"), make([]byte, 4096))
	r.refresh(ctx)
	if lists != 3 || diskstest.ImageNames(inv.Pending().GetItems()) != "base.qcow2 boot/vmlinuz disk.raw new.raw" {
		t.Fatalf("after adding: %d listings, pending %q", lists, diskstest.ImageNames(inv.Pending().GetItems()))
	}
	if err := os.Remove(filepath.Join(dir, "new.raw")); err != nil {
		t.Fatal(err)
	}
	r.refresh(ctx)
	if p := inv.Pending(); lists != 4 || p != nil {
		t.Fatalf("after removing again: %d listings, pending %v", lists, p)
	}
	// Both changes woke the heartbeat loop, which finds nothing pending
	// now: the wake-ups coalesce into one.
	if !signalled(inv) || signalled(inv) {
		t.Error("the changes did not wake the heartbeat loop once")
	}
}

// Registration waits for the first listing, at most wait on the
// inventory's clock, and takes what there is then: nil without a list.
func TestForRegister(t *testing.T) {
	newInv := func() (*Inventory, *clocktesting.FakeClock) {
		clk := clocktesting.NewFakeClock(time.Now())
		return NewInventory(InventoryOptions{ImageDir: t.TempDir(), Clock: clk, Logger: slog.New(slog.DiscardHandler)}), clk
	}
	register := func(inv *Inventory, wait time.Duration) <-chan *apiv1.NodeImageList {
		got := make(chan *apiv1.NodeImageList, 1)
		go func() { got <- inv.ForRegister(context.Background(), wait) }()
		return got
	}
	const wait = 5 * time.Second
	returned := func(got <-chan *apiv1.NodeImageList, l **apiv1.NodeImageList) func() bool {
		return func() bool {
			select {
			case *l = <-got:
				return true
			default:
				return false
			}
		}
	}

	// No listing: the wait runs out on the clock, not before.
	inv, clk := newInv()
	got := register(inv, wait)
	testutil.Eventually(t, testTimeout, "registration waiting on the clock", clk.HasWaiters)
	clk.Step(wait - time.Nanosecond)
	var l *apiv1.NodeImageList
	if returned(got, &l)() {
		t.Fatalf("returned %v before the wait ran out", l)
	}
	clk.Step(time.Nanosecond)
	testutil.Eventually(t, testTimeout, "registration once the wait ran out", returned(got, &l))
	if l != nil {
		t.Fatalf("without a listing: %v", l)
	}

	// A listing ends the wait at once, with its list; so does a failed
	// first listing, without one.
	inv, _ = newInv()
	got = register(inv, time.Hour)
	listed := &apiv1.NodeImageList{Items: []*apiv1.NodeImage{{Name: "a.raw"}}}
	inv.Set(listed)
	testutil.Eventually(t, testTimeout, "registration after the first listing", returned(got, &l))
	if !proto.Equal(l, listed) {
		t.Fatalf("after a listing: %v", l)
	}
	inv, _ = newInv()
	got = register(inv, time.Hour)
	inv.Tried()
	testutil.Eventually(t, testTimeout, "registration after a failed first listing", returned(got, &l))
	if l != nil {
		t.Fatalf("after a failed listing: %v", l)
	}
}

// The list a node reports always passes the server's validation: images
// the server would refuse are left out, and a list that would be too
// large for a Node is cut short, by count and by size.
func TestNodeImagesFitTheServersLimits(t *testing.T) {
	inv := NewInventory(InventoryOptions{ImageDir: t.TempDir(), Logger: slog.New(slog.DiscardHandler)})
	sum := strings.Repeat("ab", 32)
	var imgs []imagestore.Image
	for i := range 2 * validation.MaxNodeImages {
		// Long names: the byte bound is reached before the count.
		name := fmt.Sprintf("%s/%s/%05d.raw", strings.Repeat("d", 250), strings.Repeat("e", 250), i)
		imgs = append(imgs, imagestore.Image{Name: name, Format: "raw", VirtualSize: 1, Size: 1, SHA256: sum})
	}
	imgs = append(imgs, imagestore.Image{Name: "sub/./x", Format: "raw", SHA256: sum})
	l := inv.nodeImages(imgs)
	if errs := validation.ValidateNodeImages(l.Items, field.NewPath("images")); len(errs) > 0 {
		t.Fatalf("the node's list is refused: %v", errs.ToAggregate())
	}
	if n := validation.NodeImageListSize(l.Items); n > validation.MaxNodeImageListBytes || n < validation.MaxNodeImageListBytes-400 {
		t.Errorf("list of %d bytes: want it cut just under %d", n, validation.MaxNodeImageListBytes)
	}

	imgs = imgs[:0]
	for i := range validation.MaxNodeImages + 5 {
		imgs = append(imgs, imagestore.Image{Name: fmt.Sprintf("i%d.raw", i), Format: "raw", SHA256: sum})
	}
	if l := inv.nodeImages(imgs); len(l.Items) != validation.MaxNodeImages {
		t.Errorf("%d images listed, want the first %d", len(l.Items), validation.MaxNodeImages)
	}
}
