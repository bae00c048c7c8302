// Package memstore is an in-memory store.Store for unit tests of
// controllers. It behaves like the etcd store — storetest.RunConformance
// runs against both — including resource versions from one revision
// counter per DB, watches with history, resume and re-list after
// compaction. On top it records every write and can inject failures, which
// controller tests use to see what a reconcile did. Integration tests use
// the real etcd store.
//
// It does no namespace accounting (store.Options.Accounting): no quota
// refuses its writes and no Namespace is made on first use. Quotas are a
// property of the etcd transaction, so their tests run on real etcd
// (internal/store/accounting_test.go).
package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// DB is what one etcd is to its stores: the revision counter, the lock
// and the compaction point they share.
type DB struct {
	now func() time.Time

	mu        sync.Mutex
	rev       int64
	compacted int64
	changed   chan struct{} // closed and replaced on every write, to wake watches
	stores    []interface{ compact(rev int64) }
}

// NewDB returns an empty DB whose stores stamp timestamps with now
// (time.Now when nil).
func NewDB(now func() time.Time) *DB {
	if now == nil {
		now = time.Now
	}
	return &DB{now: now, changed: make(chan struct{})}
}

// Compact discards the history before rev, as etcd's compaction does: a
// watch that needs older events gets RESET and a fresh listing.
func (db *DB) Compact(rev int64) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	switch {
	case rev > db.rev:
		return fmt.Errorf("memstore: compact to revision %d: future revision (now %d)", rev, db.rev)
	case rev <= db.compacted:
		return fmt.Errorf("memstore: compact to revision %d: already compacted to %d", rev, db.compacted)
	}
	db.compacted = rev
	for _, s := range db.stores {
		s.compact(rev)
	}
	db.wake() // lagging watches must notice
	return nil
}

// bump starts the next revision; db.mu is held.
func (db *DB) bump() int64 {
	db.rev++
	db.wake()
	return db.rev
}

func (db *DB) wake() {
	close(db.changed)
	db.changed = make(chan struct{})
}

// Write is one recorded write.
type Write[T store.Object] struct {
	Op     string // create, update, delete
	Key    string // namespace/name
	Object T      // state after the write (before, for delete)
}

// change is one entry of a store's history, as etcd keeps it: the state
// before and after a write at rev.
type change[T store.Object] struct {
	rev               int64
	prev, obj         T
	hasPrev, isDelete bool
}

// Store is one resource in a DB.
type Store[T store.Object] struct {
	db  *DB
	res store.Resource[T]

	// Guarded by db.mu.
	items    map[string]T
	history  []change[T]
	writes   []Write[T]
	failNext map[string]error // FailNext: returned by the next write of that op
}

var _ store.Store[store.Object] = (*Store[store.Object])(nil)

// New returns the empty store of res in db.
func New[T store.Object](db *DB, res store.Resource[T]) *Store[T] {
	s := &Store[T]{db: db, res: res, items: map[string]T{}, failNext: map[string]error{}}
	db.mu.Lock()
	db.stores = append(db.stores, s)
	db.mu.Unlock()
	return s
}

func clone[T store.Object](o T) T { return proto.Clone(o).(T) }

func (s *Store[T]) errorf(ref string, err error) error {
	return fmt.Errorf("%s %q: %w", strings.ToLower(s.res.Kind), ref, err)
}

// key checks obj's metadata and names it as the etcd store does.
func (s *Store[T]) key(obj T) (string, error) {
	md := obj.GetMetadata()
	if md == nil {
		return "", fmt.Errorf("%s: %w: metadata is required", strings.ToLower(s.res.Kind), store.ErrInvalid)
	}
	return s.res.CheckKey(md.Namespace, md.Name)
}

// put stores obj (nil: deletes key) at a new revision and records the
// change; db.mu is held. It returns the revision.
func (s *Store[T]) put(key string, obj T, isDelete bool) int64 {
	rev := s.db.bump()
	c := change[T]{rev: rev, isDelete: isDelete}
	c.prev, c.hasPrev = s.items[key]
	if isDelete {
		delete(s.items, key)
	} else {
		obj.GetMetadata().ResourceVersion = rev
		s.items[key] = obj
		c.obj = obj
	}
	s.history = append(s.history, c)
	return rev
}

// compact drops history before rev; db.mu is held.
func (s *Store[T]) compact(rev int64) {
	s.history = slices.Clone(s.history[s.firstAt(rev):])
}

// firstAt is the index of the first change at or after rev; db.mu is held.
func (s *Store[T]) firstAt(rev int64) int {
	i, _ := slices.BinarySearchFunc(s.history, rev, func(c change[T], rev int64) int { return cmp.Compare(c.rev, rev) })
	return i
}

// Seed stores objects as they are (uid and timestamps kept), without
// recording writes. Watches see them as created.
func (s *Store[T]) Seed(objs ...T) {
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	for _, o := range objs {
		md := o.GetMetadata()
		s.put(apiv1.Ref(md.GetNamespace(), md.GetName()), clone(o), false)
	}
}

// Writes returns the writes recorded so far.
func (s *Store[T]) Writes() []Write[T] {
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	return slices.Clone(s.writes)
}

// ResetWrites forgets recorded writes.
func (s *Store[T]) ResetWrites() {
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	s.writes = nil
}

// FailNext makes the next write of op (create, update, delete) fail.
func (s *Store[T]) FailNext(op string, err error) {
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	s.failNext[op] = err
}

func (s *Store[T]) injected(op string) error {
	err := s.failNext[op]
	delete(s.failNext, op)
	return err
}

func (s *Store[T]) record(op, key string, o T) {
	s.writes = append(s.writes, Write[T]{Op: op, Key: key, Object: clone(o)})
}

// Create is store.Store's.
func (s *Store[T]) Create(_ context.Context, obj T) (T, error) {
	var zero T
	key, err := s.key(obj)
	if err != nil {
		return zero, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	if err := s.injected("create"); err != nil {
		return zero, err
	}
	if _, ok := s.items[key]; ok {
		return zero, s.errorf(key, store.ErrAlreadyExists)
	}
	c := clone(obj)
	md := c.GetMetadata()
	md.Uid = uuid.NewString()
	md.CreationTimestamp = timestamppb.New(s.db.now())
	if md.Generation == 0 {
		md.Generation = 1
	}
	s.put(key, c, false)
	s.record("create", key, c)
	return clone(c), nil
}

// Get is store.Store's.
func (s *Store[T]) Get(_ context.Context, namespace, name string) (T, error) {
	var zero T
	key, err := s.res.CheckKey(namespace, name)
	if err != nil {
		return zero, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	o, ok := s.items[key]
	if !ok {
		return zero, s.errorf(key, store.ErrNotFound)
	}
	return clone(o), nil
}

// List is store.Store's.
func (s *Store[T]) List(_ context.Context, opts store.ListOptions) ([]T, int64, error) {
	f, err := s.res.Select(opts.Namespace, "", opts.LabelSelector)
	if err != nil {
		return nil, 0, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	return s.listLocked(f), s.db.rev, nil
}

func (s *Store[T]) listLocked(f store.Selection) []T {
	out := []T{}
	for _, o := range s.items {
		if f.Matches(o) {
			out = append(out, clone(o))
		}
	}
	store.SortByRef(out)
	return out
}

// Update is store.Store's.
func (s *Store[T]) Update(_ context.Context, obj T) (T, error) {
	out, _, err := s.update(obj)
	return out, err
}

// update writes obj if the stored object is at obj's resource version; on
// ErrConflict it also returns the stored object, as the etcd store does.
func (s *Store[T]) update(obj T) (out, current T, err error) {
	var zero T
	key, err := s.key(obj)
	if err != nil {
		return zero, zero, err
	}
	rv := obj.GetMetadata().ResourceVersion
	if rv <= 0 {
		return zero, zero, s.errorf(key, fmt.Errorf("%w: resource version is required", store.ErrInvalid))
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	cur, ok := s.items[key]
	if err := s.injected("update"); err != nil {
		// Like a failed compare-and-swap: the stored object comes back
		// for a retry.
		if ok {
			return zero, clone(cur), err
		}
		return zero, zero, err
	}
	if !ok {
		return zero, zero, s.errorf(key, store.ErrNotFound)
	}
	if stored := cur.GetMetadata().ResourceVersion; stored != rv {
		return zero, clone(cur), s.errorf(key, fmt.Errorf("%w: resource version %d, stored %d", store.ErrConflict, rv, stored))
	}
	c := clone(obj)
	if md := c.GetMetadata(); md.DeletionTimestamp != nil && len(md.Finalizers) == 0 {
		md.ResourceVersion = s.put(key, zero, true)
		s.record("delete", key, c)
		return clone(c), zero, nil
	}
	s.put(key, c, false)
	s.record("update", key, c)
	return clone(c), zero, nil
}

// GuaranteedUpdate is store.Store's. fn runs without the lock: it may use
// the store itself.
func (s *Store[T]) GuaranteedUpdate(ctx context.Context, namespace, name string, fn func(T) (T, error)) (T, error) {
	var zero T
	cur, err := s.Get(ctx, namespace, name)
	if err != nil {
		return zero, err
	}
	return store.UpdateLoop(ctx, cur, namespace, name, fn, s.update,
		func(err error) error { return s.errorf(apiv1.Ref(namespace, name), err) })
}

// Delete is store.Store's.
func (s *Store[T]) Delete(_ context.Context, namespace, name string, opts store.DeleteOptions) (T, bool, error) {
	var zero T
	key, err := s.res.CheckKey(namespace, name)
	if err != nil {
		return zero, false, err
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	if err := s.injected("delete"); err != nil {
		return zero, false, err
	}
	cur, ok := s.items[key]
	if !ok {
		return zero, false, s.errorf(key, store.ErrNotFound)
	}
	md := cur.GetMetadata()
	if opts.UID != "" && opts.UID != md.Uid {
		return zero, false, s.errorf(key, fmt.Errorf("%w: uid is %s, precondition %s", store.ErrConflict, md.Uid, opts.UID))
	}
	if opts.ResourceVersion != 0 && opts.ResourceVersion != md.ResourceVersion {
		return zero, false, s.errorf(key, fmt.Errorf("%w: resource version is %d, precondition %d",
			store.ErrConflict, md.ResourceVersion, opts.ResourceVersion))
	}
	if len(md.Finalizers) > 0 {
		if md.DeletionTimestamp != nil {
			return clone(cur), false, nil // deletion already requested
		}
		c := clone(cur)
		c.GetMetadata().DeletionTimestamp = timestamppb.New(s.db.now())
		s.put(key, c, false)
		s.record("update", key, c)
		return clone(c), false, nil
	}
	s.record("delete", key, cur)
	c := clone(cur)
	c.GetMetadata().ResourceVersion = s.put(key, zero, true)
	return c, true, nil
}
