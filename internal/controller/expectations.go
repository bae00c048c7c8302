package controller

import (
	"sync"
	"time"
)

// ExpectationsTTL bounds how long a controller waits for its cache to show
// its own writes before acting anyway (KubeVirt uses 5 minutes).
const ExpectationsTTL = 5 * time.Minute

// Expectations count, per key, the creations and deletions a controller
// made and its cache has not shown yet (KubeVirt's ControllerExpectations,
// pkg/controller/expectations.go). Until they are observed, a sync must not
// decide from the cache, or it would create or delete twice.
type Expectations struct {
	mu    sync.Mutex
	items map[string]*expectation
	now   func() time.Time
}

type expectation struct {
	adds, dels int
	at         time.Time
}

// NewExpectations returns an empty set; now may be nil for time.Now.
func NewExpectations(now func() time.Time) *Expectations {
	if now == nil {
		now = time.Now
	}
	return &Expectations{items: map[string]*expectation{}, now: now}
}

// ExpectCreations records n creations about to be made for key.
func (e *Expectations) ExpectCreations(key string, n int) { e.raise(key, n, 0) }

// ExpectDeletions records n deletions about to be made for key.
func (e *Expectations) ExpectDeletions(key string, n int) { e.raise(key, 0, n) }

func (e *Expectations) raise(key string, adds, dels int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.items[key]
	if x == nil {
		x = &expectation{}
		e.items[key] = x
	}
	x.adds += adds
	x.dels += dels
	x.at = e.now()
}

// CreationObserved is called by the informer handler when a creation shows.
func (e *Expectations) CreationObserved(key string) { e.lower(key, 1, 0) }

// DeletionObserved is called by the informer handler when a deletion shows.
func (e *Expectations) DeletionObserved(key string) { e.lower(key, 0, 1) }

// CreationFailed undoes an expectation whose write failed.
func (e *Expectations) CreationFailed(key string) { e.lower(key, 1, 0) }

// DeletionFailed undoes an expectation whose write failed.
func (e *Expectations) DeletionFailed(key string) { e.lower(key, 0, 1) }

func (e *Expectations) lower(key string, adds, dels int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.items[key]
	if x == nil {
		return
	}
	x.adds = max(x.adds-adds, 0)
	x.dels = max(x.dels-dels, 0)
	if x.adds == 0 && x.dels == 0 {
		delete(e.items, key)
	}
}

// Satisfied reports whether key has no outstanding expectations (or they
// expired).
func (e *Expectations) Satisfied(key string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	x := e.items[key]
	if x == nil {
		return true
	}
	if e.now().Sub(x.at) > ExpectationsTTL {
		delete(e.items, key)
		return true
	}
	return false
}

// Pending reports the outstanding creations and deletions for key.
func (e *Expectations) Pending(key string) (adds, dels int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if x := e.items[key]; x != nil {
		return x.adds, x.dels
	}
	return 0, 0
}

// Delete forgets key (its object is gone).
func (e *Expectations) Delete(key string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.items, key)
}
