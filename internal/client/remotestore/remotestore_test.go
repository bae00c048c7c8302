package remotestore

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/apiserver"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/storetest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func setup(t *testing.T) (context.Context, store.Store[*apiv1.VirtualMachineInstance], *VMIs) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	etcd := storetest.Client(t)
	stores := apiserver.NewStores(etcd, store.Options{Prefix: storetest.Prefix(t)})
	srv := apiserver.New(stores, apiserver.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	c := client.New(testutil.ServeGRPC(t, srv.Register))
	return ctx, stores.VMIs, NewVMIs(c.VMIs)
}

func vmi(name, node string) *apiv1.VirtualMachineInstance {
	return &apiv1.VirtualMachineInstance{Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name,
		Labels: map[string]string{apiv1.LabelNodeName: node}}}
}

// API errors come back as the store's sentinels, as the informer matches
// them on either side of the API.
func TestWatchErrorsAreStoreSentinels(t *testing.T) {
	ctx, _, rs := setup(t)
	// A stream's error comes with its first read: as the final event.
	ch, err := rs.Watch(ctx, store.WatchOptions{ListOptions: store.ListOptions{LabelSelector: "a=(b"}})
	if err != nil {
		t.Fatal(err)
	}
	if ev := storetest.Next(t, ch); !errors.Is(ev.Err, store.ErrInvalid) {
		t.Fatalf("bad selector: event %v, want an ErrInvalid error", ev)
	}
}

// The node agent builds its VMI informer on the adapter.
var _ informer.Watcher[*apiv1.VirtualMachineInstance] = (*VMIs)(nil)

// The informer runs on the adapter as on the store: listing, then
// changes, filtered by label.
func TestInformerOverAPI(t *testing.T) {
	ctx, st, rs := setup(t)
	if _, err := st.Create(ctx, vmi("a", "n1")); err != nil {
		t.Fatal(err)
	}
	inf := informer.New[*apiv1.VirtualMachineInstance](rs, store.ListOptions{LabelSelector: apiv1.LabelNodeName + "=n1"}, nil)
	deleted := make(chan string, 4)
	inf.AddHandler(informer.Handler[*apiv1.VirtualMachineInstance]{OnDelete: func(v *apiv1.VirtualMachineInstance) { deleted <- v.Metadata.Name }})
	ictx, cancel := context.WithCancel(ctx)
	defer cancel()
	go inf.Run(ictx)
	<-inf.Synced()
	if _, ok := inf.Get("default", "a"); !ok {
		t.Fatal("listing not cached")
	}
	if _, err := st.Create(ctx, vmi("b", "n1")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create(ctx, vmi("other", "n2")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Delete(ctx, "default", "a", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case name := <-deleted:
		if name != "a" {
			t.Fatalf("deleted %s", name)
		}
	case <-ctx.Done():
		t.Fatal("no delete event")
	}
	testutil.Eventually(t, 10*time.Second, "added VMI cached", func() bool {
		_, ok := inf.Get("default", "b")
		return ok
	})
	if _, ok := inf.Get("default", "other"); ok {
		t.Fatal("another node's VMI cached")
	}
}
