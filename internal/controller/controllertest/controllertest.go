// Package controllertest holds what the controllers' tests share: each
// resource a controller reads kept in an in-memory store, with the
// informer the controller reads it through.
package controllertest

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
)

// Cache is one resource in a memstore and an informer over it. The
// informer is never started: Sync fills it, so a test decides when the
// controller sees a write.
type Cache[T store.Object] struct {
	Store    *memstore.Store[T]
	Informer *informer.Informer[T]
}

// NewCache is the store of res in db, holding seed, and an empty informer
// over it.
func NewCache[T store.Object](db *memstore.DB, res store.Resource[T], seed ...T) Cache[T] {
	st := memstore.New(db, res)
	st.Seed(seed...)
	return Cache[T]{Store: st, Informer: informer.New(st, store.ListOptions{}, Discard())}
}

// Sync makes the informer show what the store holds, as its watch would.
func (c Cache[T]) Sync(t testing.TB) {
	t.Helper()
	objs, _, err := c.Store.List(context.Background(), store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Informer.Fill(objs...)
}

// Get is the stored object namespace/name ("" for cluster-scoped
// kinds); t fails when there is none.
func (c Cache[T]) Get(t testing.TB, namespace, name string) T {
	t.Helper()
	obj, err := c.Store.Get(context.Background(), namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// Update changes the stored object namespace/name with fn, as another
// writer would: the informer sees it on the next Sync.
func (c Cache[T]) Update(t testing.TB, namespace, name string, fn func(T)) {
	t.Helper()
	if _, err := c.Store.GuaranteedUpdate(context.Background(), namespace, name, func(obj T) (T, error) {
		fn(obj)
		return obj, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// Discard is a logger that drops everything.
func Discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
