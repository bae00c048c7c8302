package vmi

import (
	"sync"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
)

// assumeTTL bounds how long a reservation outlives a cache that never
// shows its placement (a lost watch event); after that the cache is
// trusted again. It matches the expectations TTL of the other controllers.
const assumeTTL = controller.ExpectationsTTL

// reservation is a placement this controller wrote and its cache may not
// show yet.
type reservation struct {
	uid  string
	node string
	req  resources
	held holdings // of its spec
	at   time.Time
}

// assumeCache is kube-scheduler's "assume" step: between writing a
// placement and seeing it in the informer, the VMI's request is held
// against its node here, so the next decision does not hand the same
// capacity out twice.
type assumeCache struct {
	mu    sync.Mutex
	items map[string]reservation // VMI cache key → reservation
}

func newAssumeCache() *assumeCache {
	return &assumeCache{items: map[string]reservation{}}
}

func (a *assumeCache) assume(key string, r reservation) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.items[key] = r
}

func (a *assumeCache) forget(key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.items, key)
}

// get returns the live reservation of key, dropping an expired one.
func (a *assumeCache) get(key string, now time.Time) (reservation, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r, ok := a.items[key]
	if ok && now.Sub(r.at) > assumeTTL {
		delete(a.items, key)
		return reservation{}, false
	}
	return r, ok
}

// snapshot returns the live reservations, dropping expired ones.
func (a *assumeCache) snapshot(now time.Time) map[string]reservation {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]reservation, len(a.items))
	for k, r := range a.items {
		if now.Sub(r.at) > assumeTTL {
			delete(a.items, k)
			continue
		}
		out[k] = r
	}
	return out
}

func (a *assumeCache) len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.items)
}
