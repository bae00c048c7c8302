package store_test

import (
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/storetest"
)

// Watch order, resume and re-list after compaction are in the conformance
// suite; a server going away is the etcd store's own.
func TestWatchBrokenSendsError(t *testing.T) {
	t.Parallel()
	srv := storetest.NewServer(t)
	s := vmStoreWith(t, srv.Client())
	w, err := s.Watch(t.Context(), store.WatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	storetest.Expect(t, w, apiv1.EventType_SYNCED, "", 0)
	srv.Close()
	e := storetest.Next(t, w)
	if e.Err == nil {
		t.Fatalf("got %v after the server stopped, want an error", e)
	}
	if _, ok := <-w; ok {
		t.Fatal("channel open after the error event")
	}
	t.Logf("error event: %v", e.Err)
}
