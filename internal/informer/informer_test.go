package informer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/storetest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func node(name string, labels map[string]string) *apiv1.Node {
	return &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: name, Labels: labels}, Status: &apiv1.NodeStatus{}}
}

type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(s string) { r.mu.Lock(); r.events = append(r.events, s); r.mu.Unlock() }
func (r *recorder) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

func TestInformerListsWatchesAndIndexes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := store.New(storetest.Client(t), store.Nodes, store.Options{Prefix: storetest.Prefix(t)})
	if _, err := st.Create(ctx, node("a", map[string]string{"zone": "1"})); err != nil {
		t.Fatal(err)
	}
	inf := New(st, store.ListOptions{}, nil)
	inf.AddIndex("zone", func(n *apiv1.Node) []string { return []string{n.Metadata.Labels["zone"]} })
	var rec recorder
	inf.AddHandler(Handler[*apiv1.Node]{
		OnAdd:    func(n *apiv1.Node) { rec.add("add " + n.Metadata.Name) },
		OnUpdate: func(_, n *apiv1.Node) { rec.add("update " + n.Metadata.Name) },
		OnDelete: func(n *apiv1.Node) { rec.add("delete " + n.Metadata.Name) },
	})
	go inf.Run(ctx)
	<-inf.Synced()
	if _, ok := inf.Get("", "a"); !ok || len(inf.ByIndex("zone", "1")) != 1 {
		t.Fatal("initial listing not cached")
	}
	if _, err := st.Create(ctx, node("b", map[string]string{"zone": "2"})); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GuaranteedUpdate(ctx, "", "b", func(n *apiv1.Node) (*apiv1.Node, error) {
		n.Metadata.Labels["zone"] = "1"
		return n, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Delete(ctx, "", "a", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, "four events", func() bool { return len(rec.snapshot()) == 4 })
	want := []string{"add a", "add b", "update b", "delete a"}
	if got := rec.snapshot(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if z := inf.ByIndex("zone", "1"); len(z) != 1 || z[0].Metadata.Name != "b" {
		t.Fatalf("index after moves: %v", z)
	}
	if len(inf.ByIndex("zone", "2")) != 0 {
		t.Fatal("stale index entry")
	}
}

// After a compaction the informer re-lists: objects deleted while it was
// not watching are reported deleted, others updated.
func TestInformerResumesAfterCompaction(t *testing.T) {
	srv := storetest.NewServer(t)
	c := srv.Client()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := store.New(c, store.Nodes, store.Options{Prefix: "/p"})
	for _, n := range []string{"a", "b"} {
		if _, err := st.Create(ctx, node(n, nil)); err != nil {
			t.Fatal(err)
		}
	}
	inf := New(st, store.ListOptions{}, nil)
	var rec recorder
	inf.AddHandler(Handler[*apiv1.Node]{
		OnAdd:    func(n *apiv1.Node) { rec.add("add " + n.Metadata.Name) },
		OnUpdate: func(_, n *apiv1.Node) { rec.add("update " + n.Metadata.Name) },
		OnDelete: func(n *apiv1.Node) { rec.add("delete " + n.Metadata.Name) },
	})
	// Sync once, stop, change things, compact, resume from the old revision.
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { inf.Run(runCtx); close(done) }()
	<-inf.Synced()
	stop()
	<-done
	if _, _, err := st.Delete(ctx, "", "a", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GuaranteedUpdate(ctx, "", "b", func(n *apiv1.Node) (*apiv1.Node, error) {
		n.Status.Address = "changed"
		return n, nil
	}); err != nil {
		t.Fatal(err)
	}
	cur, err := st.Create(ctx, node("c", nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Compact(ctx, cur.Metadata.ResourceVersion); err != nil {
		t.Fatal(err)
	}
	go inf.Run(ctx)
	testutil.Eventually(t, 10*time.Second, "five events after the re-list", func() bool { return len(rec.snapshot()) == 5 })
	got := rec.snapshot()
	want := []string{"add a", "add b", "delete a", "update b", "add c"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	b, _ := inf.Get("", "b")
	if b.Status.Address != "changed" {
		t.Fatal("cache not refreshed")
	}
}

func TestFillForTests(t *testing.T) {
	inf := New[*apiv1.Node](nil, store.ListOptions{}, nil)
	inf.Fill(node("x", nil), node("y", nil))
	if !inf.HasSynced() || len(inf.List()) != 2 {
		t.Fatal("fill")
	}
	n, _ := inf.Get("", "x")
	if !proto.Equal(n, node("x", nil)) {
		t.Fatal("fill content")
	}
}

// TestAppendUnsorted: the same objects as List, whatever the order,
// after what dst held.
func TestAppendUnsorted(t *testing.T) {
	inf := New[*apiv1.Node](nil, store.ListOptions{}, nil)
	inf.Fill(node("c", nil), node("a", nil), node("b", nil))
	got := inf.AppendUnsorted([]*apiv1.Node{node("z", nil)})
	var names []string
	for _, n := range got[1:] {
		names = append(names, n.GetMetadata().GetName())
	}
	slices.Sort(names)
	if got[0].GetMetadata().GetName() != "z" || fmt.Sprint(names) != "[a b c]" {
		t.Fatalf("AppendUnsorted = %v, %v", got[0], names)
	}
}
