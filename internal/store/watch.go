package store

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// watchBuffer is the channel capacity of a watch: enough to absorb bursts,
// small enough that a stuck consumer holds back its etcd watch, not memory.
const watchBuffer = 100

// Watch follows store.go. Event revisions: ADDED from a listing carries
// the object's own resource version, SYNCED the revision of the listing
// (where a later watch resumes), RESET the revision etcd compacted to, and
// every other event the revision of its write.
func (s *etcdStore[T]) Watch(ctx context.Context, opts WatchOptions) (<-chan Event[T], error) {
	if opts.ResourceVersion < 0 {
		return nil, fmt.Errorf("%ss: %w: negative resource version %d", s.keys.kind, ErrInvalid, opts.ResourceVersion)
	}
	f, err := s.newFilter(opts.Namespace, opts.Name, opts.LabelSelector)
	if err != nil {
		return nil, err
	}
	w := &watcher[T]{s: s, f: f, out: make(chan Event[T], watchBuffer)}

	// The initial list happens before returning so that a broken etcd
	// fails the call rather than the first event.
	var initial []T
	rev := opts.ResourceVersion
	if rev == 0 {
		if initial, rev, err = s.list(ctx, f); err != nil {
			return nil, err
		}
	}
	go w.run(ctx, opts.ResourceVersion == 0, initial, rev)
	return w.out, nil
}

type watcher[T Object] struct {
	s   *etcdStore[T]
	f   filter
	out chan Event[T]
}

// run delivers events until ctx ends or etcd fails. rev is the revision
// already delivered (listed, or given by the caller).
func (w *watcher[T]) run(ctx context.Context, listed bool, initial []T, rev int64) {
	defer close(w.out)
	if listed && !w.sendList(ctx, initial, rev) {
		return
	}
	for {
		// Watches of many objects share the store's etcd watch while
		// they keep up (hub.go).
		if w.f.isPrefix && !w.followHub(ctx, &rev) {
			return
		}
		compacted, err := w.watch(ctx, &rev)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			w.send(ctx, Event[T]{Err: err})
			return
		}
		// History after rev is gone: start over from a fresh list.
		if !w.send(ctx, Event[T]{Type: apiv1.EventType_RESET, Revision: compacted}) {
			return
		}
		objs, listRev, err := w.s.list(ctx, w.f)
		if err != nil {
			if ctx.Err() == nil {
				w.send(ctx, Event[T]{Err: err})
			}
			return
		}
		if !w.sendList(ctx, objs, listRev) {
			return
		}
		rev = listRev
	}
}

func (w *watcher[T]) sendList(ctx context.Context, objs []T, rev int64) bool {
	for _, obj := range objs {
		e := Event[T]{Type: apiv1.EventType_ADDED, Object: obj, Revision: obj.GetMetadata().ResourceVersion}
		if !w.send(ctx, e) {
			return false
		}
	}
	return w.send(ctx, Event[T]{Type: apiv1.EventType_SYNCED, Revision: rev})
}

// send blocks until the consumer takes e: dropping events would leave it
// with a wrong picture. It gives up only when ctx ends.
func (w *watcher[T]) send(ctx context.Context, e Event[T]) bool {
	select {
	case w.out <- e:
		return true
	case <-ctx.Done():
		return false
	}
}

// watch streams etcd events after *rev, advancing *rev as they are
// delivered. It returns the compaction revision when etcd no longer has
// the history to continue, or the error that ended the watch.
func (w *watcher[T]) watch(ctx context.Context, rev *int64) (compacted int64, err error) {
	// Without a leader the watch would stall silently; failing lets the
	// consumer notice and resume.
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	opts := []clientv3.OpOption{clientv3.WithRev(*rev + 1), clientv3.WithPrevKV()}
	if w.f.isPrefix {
		opts = append(opts, clientv3.WithPrefix())
	}
	for resp := range w.s.client.Watch(wctx, w.f.key, opts...) {
		if resp.CompactRevision != 0 {
			return resp.CompactRevision, nil
		}
		if err := resp.Err(); err != nil {
			return 0, fmt.Errorf("%ss: watch from revision %d: %w", w.s.keys.kind, *rev+1, err)
		}
		for _, ev := range resp.Events {
			e, ok, err := w.convert(ev)
			if err != nil {
				return 0, err
			}
			if ok && !w.send(ctx, e) {
				return 0, ctx.Err()
			}
			*rev = ev.Kv.ModRevision
		}
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%ss: watch from revision %d: %w", w.s.keys.kind, *rev+1, errWatchClosed)
}

var errWatchClosed = errors.New("etcd closed the watch")

// change is one etcd event with its values decoded.
type change[T Object] struct {
	del, create bool
	key         string
	rev         int64 // the write's revision (the delete's, for a delete)
	obj         T     // the new value; unset for a delete
	prev        T     // the previous value, when hasPrev
	hasPrev     bool
}

// decodeEvent decodes ev; the previous value only when needPrev, since
// that costs a second decode.
func (s *etcdStore[T]) decodeEvent(ev *clientv3.Event, needPrev bool) (change[T], error) {
	c := change[T]{del: ev.Type == mvccpb.DELETE, create: ev.IsCreate(), key: string(ev.Kv.Key), rev: ev.Kv.ModRevision}
	var err error
	if ev.PrevKv != nil && needPrev {
		if c.prev, err = s.decode(ev.PrevKv.Value, c.rev); err != nil {
			return c, err
		}
		c.hasPrev = true
	}
	if !c.del {
		if c.obj, err = s.decode(ev.Kv.Value, c.rev); err != nil {
			return c, err
		}
	}
	return c, nil
}

// convert turns an etcd event of this watch's own etcd watch into the
// event it delivers, if any.
func (w *watcher[T]) convert(ev *clientv3.Event) (Event[T], bool, error) {
	// The previous value is needed to tell whether it matched, unless
	// everything in the watched key range matches.
	c, err := w.s.decodeEvent(ev, ev.Type == mvccpb.DELETE || !w.f.all())
	if err != nil {
		return Event[T]{}, false, err
	}
	e, ok := w.s.eventFor(w.f, c, ev.PrevKv != nil, true)
	return e, ok, nil
}

// eventFor is the event a watch with filter f delivers for c, if any.
// Like the Kubernetes watch cache, an object that starts matching the
// filter is ADDED and one that stops matching is DELETED (with its last
// matching state). hadPrev says etcd sent the previous value (decoded or
// not); scoped that the change comes from an etcd watch of f's own key
// range, so that everything in it is in f's namespace. The objects of the
// event are c's own: a change shared among watches is cloned by the
// caller.
func (s *etcdStore[T]) eventFor(f filter, c change[T], hadPrev, scoped bool) (Event[T], bool) {
	var zero Event[T]
	prev := c.prev
	prevMatches := false
	switch {
	case c.hasPrev && (c.del || !f.all() || !scoped):
		prevMatches = f.Matches(prev)
	case hadPrev:
		prevMatches = true
	case c.del:
		// etcd could not say what was deleted; the key still tells who.
		ns, name := s.keys.parse(c.key)
		prev = s.newStub(ns, name, c.rev)
		prevMatches = (f.Name == "" || f.Name == name) && (scoped || f.Namespace == "" || f.Namespace == ns)
	}

	if c.del {
		if !prevMatches {
			return zero, false
		}
		return Event[T]{Type: apiv1.EventType_DELETED, Object: prev, Revision: c.rev}, true
	}

	matches := f.Matches(c.obj)
	if !hadPrev && !c.create {
		// An update whose previous state etcd could not tell: assume it
		// matched as it does now.
		prevMatches = matches
	}
	switch {
	case matches && prevMatches:
		return Event[T]{Type: apiv1.EventType_MODIFIED, Object: c.obj, Revision: c.rev}, true
	case matches:
		return Event[T]{Type: apiv1.EventType_ADDED, Object: c.obj, Revision: c.rev}, true
	case prevMatches:
		return Event[T]{Type: apiv1.EventType_DELETED, Object: prev, Revision: c.rev}, true
	}
	return zero, false
}
