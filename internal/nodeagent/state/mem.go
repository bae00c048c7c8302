package state

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	// keys indexes vmis: namespace/name to the uids of its records.
	keys map[string]map[string]bool
	node []byte
	// OnPut, when set, is called after every successful PutVMI.
	OnPut func(r *VMI)
}

var _ StateDB = (*MemDB)(nil)

// NewMemDB returns an empty database.
func NewMemDB() *MemDB { return &MemDB{vmis: map[string][]byte{}, keys: map[string]map[string]bool{}} }

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
	uids := make([]string, 0, len(m.keys[key]))
	for uid := range m.keys[key] {
		uids = append(uids, uid)
	}
	if len(uids) == 0 {
		return nil, fmt.Errorf("vmi record of %s: %w", key, ErrNotFound)
	}
	r := &VMI{}
	return r, json.Unmarshal(m.vmis[slices.Min(uids)], r)
}

// unindexLocked removes the index entry of the stored record uid.
func (m *MemDB) unindexLocked(uid string) {
	raw, ok := m.vmis[uid]
	if !ok {
		return
	}
	old := &VMI{}
	if json.Unmarshal(raw, old) != nil {
		return
	}
	delete(m.keys[old.Key()], uid)
	if len(m.keys[old.Key()]) == 0 {
		delete(m.keys, old.Key())
	}
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
	if r.UID == "" {
		return errors.New("vmi record without uid")
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.unindexLocked(r.UID)
	m.vmis[r.UID] = raw
	if m.keys[r.Key()] == nil {
		m.keys[r.Key()] = map[string]bool{}
	}
	m.keys[r.Key()][r.UID] = true
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
	m.unindexLocked(uid)
	delete(m.vmis, uid)
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
