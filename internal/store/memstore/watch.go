package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// watchBuffer is the channel capacity of a watch, as in the etcd store: a
// consumer that stops reading holds its watch back, it loses nothing.
const watchBuffer = 100

// Watch is store.Store's, with the etcd store's events and revisions:
// ADDED from a listing carries the object's resource version, SYNCED the
// listing's revision, RESET the compaction revision, and every other
// event the revision of its write.
func (s *Store[T]) Watch(ctx context.Context, opts store.WatchOptions) (<-chan store.Event[T], error) {
	if opts.ResourceVersion < 0 {
		return nil, fmt.Errorf("%ss: %w: negative resource version %d", strings.ToLower(s.res.Kind), store.ErrInvalid, opts.ResourceVersion)
	}
	f, err := s.res.Select(opts.Namespace, opts.Name, opts.LabelSelector)
	if err != nil {
		return nil, err
	}
	w := &watcher[T]{s: s, f: f, out: make(chan store.Event[T], watchBuffer)}
	rev := opts.ResourceVersion
	var initial []T
	if rev == 0 {
		s.db.mu.Lock()
		initial, rev = s.listLocked(f), s.db.rev
		s.db.mu.Unlock()
	}
	go w.run(ctx, opts.ResourceVersion == 0, initial, rev)
	return w.out, nil
}

type watcher[T store.Object] struct {
	s   *Store[T]
	f   store.Selection
	out chan store.Event[T]
}

// run delivers events after rev (the revision already delivered) until
// ctx ends.
func (w *watcher[T]) run(ctx context.Context, listed bool, initial []T, rev int64) {
	defer close(w.out)
	if listed && !w.sendList(ctx, initial, rev) {
		return
	}
	db := w.s.db
	for {
		db.mu.Lock()
		if rev+1 < db.compacted {
			// History after rev is gone: start over from a fresh list.
			compacted, objs := db.compacted, w.s.listLocked(w.f)
			rev = db.rev
			db.mu.Unlock()
			if !w.send(ctx, store.Event[T]{Type: apiv1.EventType_RESET, Revision: compacted}) || !w.sendList(ctx, objs, rev) {
				return
			}
			continue
		}
		changes := w.s.changesAfter(rev)
		// Everything up to db.rev is now read, so compaction up to there
		// cannot cut this watch off. A watch from a future revision stays
		// there, as etcd's does.
		rev = max(rev, db.rev)
		wake := db.changed
		db.mu.Unlock()

		for _, c := range changes {
			if e, ok := w.event(c); ok && !w.send(ctx, e) {
				return
			}
		}
		if len(changes) == 0 {
			select {
			case <-wake:
			case <-ctx.Done():
				return
			}
		}
	}
}

// changesAfter copies the history after rev; db.mu is held.
func (s *Store[T]) changesAfter(rev int64) []change[T] {
	return slices.Clone(s.history[s.firstAt(rev+1):])
}

// event is what this watch delivers for c, if anything. Like the etcd
// store's watch, an object that starts matching the filter is ADDED and
// one that stops matching is DELETED with its last matching state.
func (w *watcher[T]) event(c change[T]) (store.Event[T], bool) {
	prevMatches := c.hasPrev && w.f.Matches(c.prev)
	matches := !c.isDelete && w.f.Matches(c.obj)
	switch {
	case matches && prevMatches:
		return store.Event[T]{Type: apiv1.EventType_MODIFIED, Object: clone(c.obj), Revision: c.rev}, true
	case matches:
		return store.Event[T]{Type: apiv1.EventType_ADDED, Object: clone(c.obj), Revision: c.rev}, true
	case prevMatches:
		last := clone(c.prev)
		last.GetMetadata().ResourceVersion = c.rev
		return store.Event[T]{Type: apiv1.EventType_DELETED, Object: last, Revision: c.rev}, true
	}
	return store.Event[T]{}, false
}

func (w *watcher[T]) sendList(ctx context.Context, objs []T, rev int64) bool {
	for _, obj := range objs {
		if !w.send(ctx, store.Event[T]{Type: apiv1.EventType_ADDED, Object: obj, Revision: obj.GetMetadata().ResourceVersion}) {
			return false
		}
	}
	return w.send(ctx, store.Event[T]{Type: apiv1.EventType_SYNCED, Revision: rev})
}

// send blocks until the consumer takes e or ctx ends.
func (w *watcher[T]) send(ctx context.Context, e store.Event[T]) bool {
	select {
	case w.out <- e:
		return true
	case <-ctx.Done():
		return false
	}
}
