package controller

import "sync"

// WrittenVersions remembers the resource version of each object a
// controller wrote last, until its cache shows that version: a decision
// must never be made from a cached copy older than the controller's own
// write (it would act on what it has already changed).
type WrittenVersions struct {
	mu sync.Mutex
	m  map[string]int64
}

// NewWrittenVersions returns an empty set.
func NewWrittenVersions() *WrittenVersions { return &WrittenVersions{m: map[string]int64{}} }

// Wrote records a write of key at resource version rv.
func (w *WrittenVersions) Wrote(key string, rv int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.m[key] = rv
}

// Stale reports whether a cached version predates the last write of key.
func (w *WrittenVersions) Stale(key string, cached int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	rv, ok := w.m[key]
	if !ok {
		return false
	}
	if cached >= rv {
		delete(w.m, key)
		return false
	}
	return true
}

// Forget drops what is remembered of key.
func (w *WrittenVersions) Forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}
