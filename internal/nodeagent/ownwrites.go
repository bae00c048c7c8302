package nodeagent

import "sync"

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
