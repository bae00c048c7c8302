// Package memstore is an in-memory store (the store.Store reads and writes,
// not Watch) for unit tests of controllers: it keeps objects in a map, bumps
// resource versions like etcd does, records every write, and can inject
// failures. Integration tests use the real etcd store.
package memstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Write is one recorded write.
type Write[T store.Object] struct {
	Op     string // create, update, delete
	Key    string // namespace/name
	Object T      // state after the write (before, for delete)
}

// Store is one in-memory resource.
type Store[T store.Object] struct {
	res store.Resource[T]
	now func() time.Time

	mu     sync.Mutex
	rev    *int64
	items  map[string]T
	writes []Write[T]
	// FailNext, when set, is returned by the next write of that op.
	failNext map[string]error
}

// New returns an empty store. Stores that share rev share one revision
// counter, like one etcd; pass nil for a private one.
func New[T store.Object](res store.Resource[T], rev *int64, now func() time.Time) *Store[T] {
	if rev == nil {
		rev = new(int64)
	}
	if now == nil {
		now = time.Now
	}
	return &Store[T]{res: res, now: now, rev: rev, items: map[string]T{}, failNext: map[string]error{}}
}

func key(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func (s *Store[T]) clone(o T) T { return proto.Clone(o).(T) }

func (s *Store[T]) bump() int64 { *s.rev++; return *s.rev }

// Seed stores objects as they are (uid and timestamps kept), without
// recording writes.
func (s *Store[T]) Seed(objs ...T) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range objs {
		c := s.clone(o)
		c.GetMetadata().ResourceVersion = s.bump()
		s.items[key(c.GetMetadata().GetNamespace(), c.GetMetadata().GetName())] = c
	}
}

// Writes returns the writes recorded so far.
func (s *Store[T]) Writes() []Write[T] {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Write[T](nil), s.writes...)
}

// ResetWrites forgets recorded writes.
func (s *Store[T]) ResetWrites() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = nil
}

// FailNext makes the next write of op (create, update, delete) fail.
func (s *Store[T]) FailNext(op string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failNext[op] = err
}

func (s *Store[T]) injected(op string) error {
	if err := s.failNext[op]; err != nil {
		delete(s.failNext, op)
		return err
	}
	return nil
}

func (s *Store[T]) record(op, k string, o T) {
	s.writes = append(s.writes, Write[T]{Op: op, Key: k, Object: s.clone(o)})
}

func (s *Store[T]) notFound(k string) error {
	return fmt.Errorf("%s %q: %w", strings.ToLower(s.res.Kind), k, store.ErrNotFound)
}

// Create is store.Store's.
func (s *Store[T]) Create(_ context.Context, obj T) (T, error) {
	var zero T
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.injected("create"); err != nil {
		return zero, err
	}
	m := obj.GetMetadata()
	if m.GetName() == "" {
		return zero, fmt.Errorf("name required: %w", store.ErrInvalid)
	}
	k := key(m.GetNamespace(), m.GetName())
	if _, ok := s.items[k]; ok {
		return zero, fmt.Errorf("%s %q: %w", strings.ToLower(s.res.Kind), k, store.ErrAlreadyExists)
	}
	c := s.clone(obj)
	cm := c.GetMetadata()
	cm.Uid = uuid.NewString()
	cm.CreationTimestamp = timestamppb.New(s.now())
	if cm.Generation == 0 {
		cm.Generation = 1
	}
	cm.ResourceVersion = s.bump()
	s.items[k] = c
	s.record("create", k, c)
	return s.clone(c), nil
}

// Get is store.Store's.
func (s *Store[T]) Get(_ context.Context, ns, name string) (T, error) {
	var zero T
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.items[key(ns, name)]
	if !ok {
		return zero, s.notFound(key(ns, name))
	}
	return s.clone(o), nil
}

// List is store.Store's.
func (s *Store[T]) List(_ context.Context, opts store.ListOptions) ([]T, int64, error) {
	sel, err := labels.Parse(opts.LabelSelector)
	if err != nil {
		return nil, 0, fmt.Errorf("label selector: %w: %w", err, store.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []T
	for _, o := range s.items {
		m := o.GetMetadata()
		if opts.Namespace != "" && m.GetNamespace() != opts.Namespace {
			continue
		}
		if !sel.Matches(labels.Set(m.GetLabels())) {
			continue
		}
		out = append(out, s.clone(o))
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].GetMetadata(), out[j].GetMetadata()
		return key(a.GetNamespace(), a.GetName()) < key(b.GetNamespace(), b.GetName())
	})
	return out, *s.rev, nil
}

// Update is store.Store's.
func (s *Store[T]) Update(_ context.Context, obj T) (T, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.updateLocked(obj)
}

func (s *Store[T]) updateLocked(obj T) (T, error) {
	var zero T
	if err := s.injected("update"); err != nil {
		return zero, err
	}
	m := obj.GetMetadata()
	k := key(m.GetNamespace(), m.GetName())
	if m.GetResourceVersion() == 0 {
		return zero, fmt.Errorf("resource version required: %w", store.ErrInvalid)
	}
	cur, ok := s.items[k]
	if !ok {
		return zero, s.notFound(k)
	}
	if cur.GetMetadata().GetResourceVersion() != m.GetResourceVersion() {
		return zero, fmt.Errorf("%s %q: %w", strings.ToLower(s.res.Kind), k, store.ErrConflict)
	}
	c := s.clone(obj)
	c.GetMetadata().ResourceVersion = s.bump()
	if c.GetMetadata().GetDeletionTimestamp() != nil && len(c.GetMetadata().GetFinalizers()) == 0 {
		delete(s.items, k)
		s.record("delete", k, c)
		return s.clone(c), nil
	}
	s.items[k] = c
	s.record("update", k, c)
	return s.clone(c), nil
}

// GuaranteedUpdate is store.Store's.
func (s *Store[T]) GuaranteedUpdate(ctx context.Context, ns, name string, fn func(T) (T, error)) (T, error) {
	var zero T
	for ctx.Err() == nil {
		cur, err := s.Get(ctx, ns, name)
		if err != nil {
			return zero, err
		}
		in := s.clone(cur)
		out, err := fn(cur)
		if err != nil {
			return zero, err
		}
		if proto.Equal(in, out) {
			return in, nil
		}
		res, err := s.Update(ctx, out)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		return res, err
	}
	return zero, ctx.Err()
}

// Delete is store.Store's.
func (s *Store[T]) Delete(_ context.Context, ns, name string, opts store.DeleteOptions) (T, bool, error) {
	var zero T
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.injected("delete"); err != nil {
		return zero, false, err
	}
	k := key(ns, name)
	cur, ok := s.items[k]
	if !ok {
		return zero, false, s.notFound(k)
	}
	m := cur.GetMetadata()
	if (opts.UID != "" && opts.UID != m.GetUid()) || (opts.ResourceVersion != 0 && opts.ResourceVersion != m.GetResourceVersion()) {
		return zero, false, fmt.Errorf("%s %q: precondition failed: %w", strings.ToLower(s.res.Kind), k, store.ErrConflict)
	}
	if len(m.GetFinalizers()) > 0 {
		if m.GetDeletionTimestamp() != nil {
			return s.clone(cur), false, nil
		}
		c := s.clone(cur)
		c.GetMetadata().DeletionTimestamp = timestamppb.New(s.now())
		c.GetMetadata().ResourceVersion = s.bump()
		s.items[k] = c
		s.record("update", k, c)
		return s.clone(c), false, nil
	}
	delete(s.items, k)
	s.record("delete", k, cur)
	c := s.clone(cur)
	c.GetMetadata().ResourceVersion = s.bump()
	return c, true, nil
}
