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

// convert turns an etcd event into the event this watch delivers, if any.
// Like the Kubernetes watch cache, an object that starts matching the
// filter is ADDED and one that stops matching is DELETED (with its last
// matching state).
func (w *watcher[T]) convert(ev *clientv3.Event) (Event[T], bool, error) {
	rev := ev.Kv.ModRevision // for a delete, the revision of the delete
	var zero Event[T]

	var prev T
	prevMatches := false
	switch {
	case ev.PrevKv != nil && (ev.Type == mvccpb.DELETE || !w.f.all()):
		var err error
		if prev, err = w.s.decode(ev.PrevKv.Value, rev); err != nil {
			return zero, false, err
		}
		prevMatches = w.f.Matches(prev)
	case ev.PrevKv != nil:
		prevMatches = true
	case ev.Type == mvccpb.DELETE:
		// etcd could not say what was deleted; the key still tells who.
		ns, name := w.s.keys.parse(string(ev.Kv.Key))
		prev = w.s.newStub(ns, name, rev)
		prevMatches = w.f.Name == "" || w.f.Name == name
	}

	if ev.Type == mvccpb.DELETE {
		if !prevMatches {
			return zero, false, nil
		}
		return Event[T]{Type: apiv1.EventType_DELETED, Object: prev, Revision: rev}, true, nil
	}

	obj, err := w.s.decode(ev.Kv.Value, rev)
	if err != nil {
		return zero, false, err
	}
	matches := w.f.Matches(obj)
	if ev.PrevKv == nil && !ev.IsCreate() {
		// An update whose previous state etcd could not tell: assume it
		// matched as it does now.
		prevMatches = matches
	}
	switch {
	case matches && prevMatches:
		return Event[T]{Type: apiv1.EventType_MODIFIED, Object: obj, Revision: rev}, true, nil
	case matches:
		return Event[T]{Type: apiv1.EventType_ADDED, Object: obj, Revision: rev}, true, nil
	case prevMatches:
		return Event[T]{Type: apiv1.EventType_DELETED, Object: prev, Revision: rev}, true, nil
	}
	return zero, false, nil
}
