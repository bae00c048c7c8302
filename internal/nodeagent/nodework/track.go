package nodework

import (
	"context"
	"sync"
)

// ownWrites remembers, by object uid, the resource version of the node's
// last status write. The informer's copy lags behind that write until the
// watch brings it, and a pass over the older copy would take the object
// for unfinished and do its work again: a snapshot copied once more after
// its content was written Succeeded (and its data removed and remade while
// a restore reads it). A pass over a copy older than the node's own write
// does nothing; the watch event of that write queues the object again.
type ownWrites struct {
	mu sync.Mutex
	rv map[string]int64
}

// wrote records a write that left the object at version rv.
func (o *ownWrites) wrote(uid string, rv int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.rv == nil {
		o.rv = map[string]int64{}
	}
	if rv > o.rv[uid] {
		o.rv[uid] = rv
	}
}

// stale reports whether a copy at version rv predates the node's last
// write of uid; once a copy has caught up the record is dropped.
func (o *ownWrites) stale(uid string, rv int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	want, ok := o.rv[uid]
	if !ok {
		return false
	}
	if rv >= want {
		delete(o.rv, uid)
		return false
	}
	return true
}

// forget drops uid (its object is gone).
func (o *ownWrites) forget(uid string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.rv, uid)
}

// underWay is the long work (copies) in progress by object key, so that
// an object deleted or given up meanwhile can stop it.
type underWay struct {
	runMu   sync.Mutex
	running map[string]context.CancelFunc
}

// cancel stops the work under way for key, if any.
func (u *underWay) cancel(key string) {
	u.runMu.Lock()
	defer u.runMu.Unlock()
	if cancel := u.running[key]; cancel != nil {
		cancel()
	}
}

// start registers work for key under ctx; the returned func unregisters
// it (call it when the work ends).
func (u *underWay) start(ctx context.Context, key string) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	u.runMu.Lock()
	if u.running == nil {
		u.running = map[string]context.CancelFunc{}
	}
	u.running[key] = cancel
	u.runMu.Unlock()
	return ctx, func() {
		u.runMu.Lock()
		delete(u.running, key)
		u.runMu.Unlock()
		cancel()
	}
}
