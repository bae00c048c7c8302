package replicaset

import "sync"

// deletions remembers which instances each replica set deleted and its
// cache has not shown going (the uid-tracking half of KubeVirt's
// UIDTrackingControllerExpectations). Counting alone would let the
// deletion of some other instance, by a user, stand in for one of ours:
// the next pass would then still see ours as active and delete one more.
// Only a deletion found here lowers the count in controller.Expectations.
type deletions struct {
	mu sync.Mutex
	m  map[string]map[string]struct{} // replica set key → instance keys
}

func newDeletions() *deletions { return &deletions{m: map[string]map[string]struct{}{}} }

// expect records that rsKey is deleting the instance vmiKey.
func (d *deletions) expect(rsKey, vmiKey string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	set := d.m[rsKey]
	if set == nil {
		set = map[string]struct{}{}
		d.m[rsKey] = set
	}
	set[vmiKey] = struct{}{}
}

// observed forgets vmiKey and reports whether rsKey was deleting it.
func (d *deletions) observed(rsKey, vmiKey string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	set := d.m[rsKey]
	if _, ok := set[vmiKey]; !ok {
		return false
	}
	delete(set, vmiKey)
	if len(set) == 0 {
		delete(d.m, rsKey)
	}
	return true
}

// clear forgets every deletion of rsKey (it is gone).
func (d *deletions) clear(rsKey string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.m, rsKey)
}
