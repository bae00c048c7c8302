package nodework

import "testing"

func TestOwnWritesHoldBackOlderCopies(t *testing.T) {
	var o ownWrites
	if o.stale("a", 1) {
		t.Fatal("a copy of an object never written is stale")
	}
	o.wrote("a", 10)
	o.wrote("a", 7) // an older write's answer arriving late changes nothing
	for _, rv := range []int64{3, 7, 9} {
		if !o.stale("a", rv) {
			t.Errorf("copy at %d taken as current after the node wrote 10", rv)
		}
	}
	if o.stale("b", 3) {
		t.Error("another object held back")
	}
	if o.stale("a", 12) {
		t.Error("copy at 12 held back after a write at 10")
	}
	// Caught up: the record is gone, so even an older copy (a relist from
	// another server) is handled again.
	if o.stale("a", 9) {
		t.Error("record kept after the cache caught up")
	}
	o.wrote("c", 5)
	o.forget("c")
	if o.stale("c", 1) {
		t.Error("forgotten object held back")
	}
}
