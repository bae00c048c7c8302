package store

import (
	"context"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// A store's watches of many objects (a namespace, all namespaces, a
// selector) share one etcd watch of the resource: the hub. Without it,
// every watch was an etcd watch of its own, and each one decoded every
// event of its key range to apply its selector: 1,000 node agents each
// watching their own instances made every VMI write cost etcd 1,000 event
// deliveries and the server 2,000 decodes. The hub decodes an event once
// and hands it to the watches it concerns; a watch selecting one node's
// objects (virtplane.io/node-name=<node>, what every node agent watches)
// is looked up by that label instead of asked.
//
// Semantics stay those of Watch: every watch gets every event after its
// revision in order, blocks nobody, and is never silently dropped. A watch
// that cannot join (the hub has gone past its revision and no longer has
// the events in between), or falls behind by hubQueue events, or whose
// hub ended (etcd closed the watch, compaction), goes on with an etcd
// watch of its own from the last revision it delivered, as all watches did
// before the hub.
var (
	// hubHistory recent events let a watch join whose revision the hub
	// has passed (it listed while the hub dispatched).
	hubHistory = 1024
	// hubQueue events may wait for one slow watch before it leaves the
	// hub for an etcd watch of its own. Variables for the tests.
	hubQueue = 4096
)

type hub[T Object] struct {
	s  *etcdStore[T]
	mu sync.Mutex
	// gen counts hub runs; a run's goroutine only dispatches while it is
	// the current one.
	gen     int
	running bool
	cancel  context.CancelFunc
	// Every event up to rev has been dispatched; history holds the last
	// events, all those after from.
	rev     int64
	from    int64
	history []change[T]
	byNode  map[string]map[*hubWatch[T]]struct{} // watches pinned to a node-name label value
	others  map[*hubWatch[T]]struct{}
}

// hubWatch is one watch's place in the hub.
type hubWatch[T Object] struct {
	f     filter
	after int64 // events up to this revision were delivered before joining
	node  string
	wake  chan struct{}

	mu    sync.Mutex
	queue []Event[T]
	left  bool // the hub dropped this watch: drain queue, then watch alone
}

func newHub[T Object](s *etcdStore[T]) *hub[T] {
	return &hub[T]{s: s, byNode: map[string]map[*hubWatch[T]]struct{}{}, others: map[*hubWatch[T]]struct{}{}}
}

// join adds a watch of f that has delivered everything up to rev, or
// returns nil when the hub cannot serve it from rev.
func (h *hub[T]) join(f filter, rev int64) *hubWatch[T] {
	hw := &hubWatch[T]{f: f, after: rev, wake: make(chan struct{}, 1)}
	if v, ok := f.Selector.RequiresExactMatch(apiv1.LabelNodeName); ok {
		hw.node = v
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.running {
		ctx, cancel := context.WithCancel(context.Background())
		h.gen++
		h.running, h.cancel, h.rev, h.from, h.history = true, cancel, rev, rev, nil
		go h.run(ctx, h.gen, rev)
	}
	if rev < h.from {
		return nil
	}
	// Events the hub dispatched after rev, before this watch joined.
	for _, c := range h.history {
		if c.rev > rev {
			h.offer(hw, c)
		}
	}
	if hw.node != "" {
		if h.byNode[hw.node] == nil {
			h.byNode[hw.node] = map[*hubWatch[T]]struct{}{}
		}
		h.byNode[hw.node][hw] = struct{}{}
	} else {
		h.others[hw] = struct{}{}
	}
	return hw
}

// leave removes hw; the last watch to leave stops the hub's etcd watch.
func (h *hub[T]) leave(hw *hubWatch[T]) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeLocked(hw)
	if h.running && len(h.others) == 0 && len(h.byNode) == 0 {
		h.stopLocked()
	}
}

func (h *hub[T]) removeLocked(hw *hubWatch[T]) {
	if hw.node == "" {
		delete(h.others, hw)
		return
	}
	if m := h.byNode[hw.node]; m != nil {
		delete(m, hw)
		if len(m) == 0 {
			delete(h.byNode, hw.node)
		}
	}
}

// stopLocked ends the current run and sends every watch off on its own.
func (h *hub[T]) stopLocked() {
	h.cancel()
	h.running, h.history = false, nil
	for hw := range h.others {
		hw.drop()
	}
	for _, m := range h.byNode {
		for hw := range m {
			hw.drop()
		}
	}
	h.others, h.byNode = map[*hubWatch[T]]struct{}{}, map[string]map[*hubWatch[T]]struct{}{}
}

// run follows the resource in etcd from rev and dispatches every event.
func (h *hub[T]) run(ctx context.Context, gen int, rev int64) {
	wctx := clientv3.WithRequireLeader(ctx)
	for resp := range h.s.client.Watch(wctx, h.s.keys.root, clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithPrevKV()) {
		if resp.CompactRevision != 0 || resp.Err() != nil {
			break
		}
		for _, ev := range resp.Events {
			c, err := h.s.decodeEvent(ev, true)
			if err != nil {
				break
			}
			if !h.dispatch(gen, c) {
				return
			}
		}
	}
	// etcd ended the watch (or the hub was stopped): every watch goes on
	// alone, where compaction and errors are told as before.
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gen == gen && h.running {
		h.stopLocked()
	}
}

// dispatch hands c to the watches it concerns; false when this run is no
// longer the hub's.
func (h *hub[T]) dispatch(gen int, c change[T]) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.gen != gen || !h.running {
		return false
	}
	h.history = append(h.history, c)
	if len(h.history) > hubHistory {
		h.from = h.history[0].rev
		h.history = h.history[1:]
	}
	h.rev = c.rev
	for hw := range h.others {
		h.offer(hw, c)
	}
	// A watch pinned to a node sees the object when it is, or was,
	// labelled with that node; otherwise its selector cannot match.
	var nodes [2]string
	if !c.del {
		nodes[0] = c.obj.GetMetadata().GetLabels()[apiv1.LabelNodeName]
	}
	if c.hasPrev {
		nodes[1] = c.prev.GetMetadata().GetLabels()[apiv1.LabelNodeName]
	}
	for i, n := range nodes {
		if n == "" || (i == 1 && n == nodes[0]) {
			continue
		}
		for hw := range h.byNode[n] {
			h.offer(hw, c)
		}
	}
	if c.del && !c.hasPrev {
		// Without the previous value the node is unknown: ask them all.
		for _, m := range h.byNode {
			for hw := range m {
				h.offer(hw, c)
			}
		}
	}
	return true
}

// offer queues the event c makes for hw, if any, as a copy of hw's own;
// a watch hubQueue events behind leaves the hub.
func (h *hub[T]) offer(hw *hubWatch[T], c change[T]) {
	if c.rev <= hw.after {
		return
	}
	// The hub decodes every previous value etcd sends, so hasPrev is
	// whether etcd sent one.
	e, ok := h.s.eventFor(hw.f, c, c.hasPrev, false)
	if !ok {
		return
	}
	e.Object = proto.Clone(e.Object).(T)
	hw.mu.Lock()
	if len(hw.queue) >= hubQueue {
		hw.left = true
		hw.mu.Unlock()
		h.removeLocked(hw)
	} else {
		hw.queue = append(hw.queue, e)
		hw.mu.Unlock()
	}
	select {
	case hw.wake <- struct{}{}:
	default:
	}
}

func (hw *hubWatch[T]) drop() {
	hw.mu.Lock()
	hw.left = true
	hw.mu.Unlock()
	select {
	case hw.wake <- struct{}{}:
	default:
	}
}

// take returns the queued events and whether the hub dropped the watch.
func (hw *hubWatch[T]) take() ([]Event[T], bool) {
	hw.mu.Lock()
	defer hw.mu.Unlock()
	q := hw.queue
	hw.queue = nil
	return q, hw.left
}

// followHub delivers the hub's events to w's consumer from *rev on, and
// returns true when w must go on with an etcd watch of its own (the hub
// could not take it, or dropped it), false when ctx ended.
func (w *watcher[T]) followHub(ctx context.Context, rev *int64) bool {
	hw := w.s.hub.join(w.f, *rev)
	if hw == nil {
		return true
	}
	defer w.s.hub.leave(hw)
	for {
		select {
		case <-ctx.Done():
			return false
		case <-hw.wake:
		}
		events, left := hw.take()
		for _, e := range events {
			if !w.send(ctx, e) {
				return false
			}
			*rev = e.Revision
		}
		if left {
			return true
		}
	}
}
