package state

import "fmt"

// keyIndex finds a record by its VMI's key (namespace/name) without
// reading the others. It lives in memory only, so the file layout stays
// what older agents read: BoltDB builds it from the records when it opens
// the file, and both databases keep it current on every put and delete.
// It is not safe for concurrent use; its database serializes the calls.
//
// A key has at most one record: the handler creates the record of a VMI
// that reused a name only after it dropped the old VMI's (Reconcile), and
// a record's namespace/name never changes (a uid is one VMI's), so the
// index needs no "rename" and put refuses a second record of a key.
type keyIndex struct {
	byKey map[string]string // key -> uid
	byUID map[string]string // uid -> key, for deletes by uid
}

func newKeyIndex() *keyIndex {
	return &keyIndex{byKey: map[string]string{}, byUID: map[string]string{}}
}

// check fails if key belongs to a record other than uid.
func (x *keyIndex) check(key, uid string) error {
	if other, ok := x.byKey[key]; ok && other != uid {
		return fmt.Errorf("vmi record %s: %s already has record %s", uid, key, other)
	}
	return nil
}

// put indexes record uid under key; call check first.
func (x *keyIndex) put(key, uid string) {
	x.byKey[key] = uid
	x.byUID[uid] = key
}

// remove drops record uid, if indexed.
func (x *keyIndex) remove(uid string) {
	key, ok := x.byUID[uid]
	if !ok {
		return
	}
	delete(x.byUID, uid)
	delete(x.byKey, key)
}

// uid returns the uid of key's record.
func (x *keyIndex) uid(key string) (string, bool) {
	uid, ok := x.byKey[key]
	return uid, ok
}
