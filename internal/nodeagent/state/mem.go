package state

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
)

// MemDB is an in-memory StateDB for tests. Records are stored encoded, as
// BoltDB stores them, so callers never share memory with the database and
// a field that does not survive encoding fails the same way in both.
// A MemDB can be handed to a second node agent to simulate a restart.
type MemDB struct {
	mu   sync.Mutex
	vmis map[string][]byte
	keys *keyIndex
	node []byte
	// OnPut, when set, is called after every successful PutVMI.
	OnPut func(r *VMI)
}

var _ StateDB = (*MemDB)(nil)

// NewMemDB returns an empty database.
func NewMemDB() *MemDB { return &MemDB{vmis: map[string][]byte{}, keys: newKeyIndex()} }

func (m *MemDB) GetVMI(uid string) (*VMI, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	raw, ok := m.vmis[uid]
	if !ok {
		return nil, fmt.Errorf("vmi record %s: %w", uid, ErrNotFound)
	}
	r := &VMI{}
	return r, json.Unmarshal(raw, r)
}

func (m *MemDB) GetVMIByKey(key string) (*VMI, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	uid, ok := m.keys.uid(key)
	if !ok {
		return nil, fmt.Errorf("vmi record of %s: %w", key, ErrNotFound)
	}
	r := &VMI{}
	return r, json.Unmarshal(m.vmis[uid], r)
}

func (m *MemDB) ListVMIs() ([]*VMI, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	uids := make([]string, 0, len(m.vmis))
	for uid := range m.vmis {
		uids = append(uids, uid)
	}
	sort.Strings(uids)
	out := make([]*VMI, 0, len(uids))
	for _, uid := range uids {
		r := &VMI{}
		if err := json.Unmarshal(m.vmis[uid], r); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (m *MemDB) PutVMI(r *VMI) error {
	raw, err := r.encode()
	if err != nil {
		return err
	}
	m.mu.Lock()
	if err := m.keys.check(r.Key(), r.UID); err != nil {
		m.mu.Unlock()
		return err
	}
	m.vmis[r.UID] = raw
	m.keys.put(r.Key(), r.UID)
	hook := m.OnPut
	m.mu.Unlock()
	if hook != nil {
		c := &VMI{}
		_ = json.Unmarshal(raw, c)
		hook(c)
	}
	return nil
}

func (m *MemDB) DeleteVMI(uid string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.vmis, uid)
	m.keys.remove(uid)
	return nil
}

func (m *MemDB) GetNode() (*Node, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := &Node{}
	if m.node == nil {
		return n, nil
	}
	return n, json.Unmarshal(m.node, n)
}

func (m *MemDB) PutNode(n *Node) error {
	raw, err := json.Marshal(n)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.node = raw
	return nil
}

// Close does nothing: the records stay for the next agent in the test.
func (m *MemDB) Close() error { return nil }
