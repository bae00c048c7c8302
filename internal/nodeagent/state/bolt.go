package state

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Bucket layout, schema version 1:
//
//	meta/
//	    version -> "1"
//	vmis/
//	    <vmi uid> -> JSON VMI record
//	node/
//	    state -> JSON Node record
//
// A database written by a newer agent (higher version) is refused rather
// than misread; older ones are brought forward by Upgrade. The index of
// records by key is kept in memory (keyIndex), not in the file, so that
// it costs no schema version: an agent can be rolled back.

// SchemaVersion is the layout this code reads and writes.
const SchemaVersion = 1

var (
	bucketMeta = []byte("meta")
	bucketVMIs = []byte("vmis")
	bucketNode = []byte("node")
	keyVersion = []byte("version")
	keyState   = []byte("state")
)

// UpgradeFunc moves a database from one schema version to the next.
type UpgradeFunc func(tx *bolt.Tx) error

// upgrades maps a version to the step that leaves it. Version 0 is a
// database without a meta bucket (a new file, or one from before
// versioning): the step creates the version 1 buckets.
var upgrades = map[int]UpgradeFunc{
	0: func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketVMIs, bucketNode} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	},
}

// BoltDB is the StateDB on a bbolt file.
type BoltDB struct {
	db *bolt.DB
	// mu serializes record writes with their index updates, and guards
	// keys.
	mu   sync.Mutex
	keys *keyIndex
}

var _ StateDB = (*BoltDB)(nil)

// OpenBolt opens (creating it if needed) the database at path and upgrades
// it to SchemaVersion, then indexes its records by key (one pass at
// start-up). A second agent on the same file fails after a second instead
// of waiting for the lock forever.
func OpenBolt(path string) (*BoltDB, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("creating state directory: %w", err)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("opening state database %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return Upgrade(tx, upgrades) }); err != nil {
		db.Close()
		return nil, fmt.Errorf("state database %s: %w", path, err)
	}
	keys, err := indexRecords(db)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("state database %s: %w", path, err)
	}
	return &BoltDB{db: db, keys: keys}, nil
}

// indexRecords indexes the stored records by key.
func indexRecords(db *bolt.DB) (*keyIndex, error) {
	keys := newKeyIndex()
	err := db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketVMIs).ForEach(func(k, raw []byte) error {
			var r VMI
			if err := json.Unmarshal(raw, &r); err != nil {
				return fmt.Errorf("decoding vmi record %s: %w", k, err)
			}
			if err := keys.check(r.Key(), string(k)); err != nil {
				return err
			}
			keys.put(r.Key(), string(k))
			return nil
		})
	})
	return keys, err
}

// Upgrade runs steps from the stored version up to SchemaVersion in tx
// and records the new version. It is exported for upgrade tests.
func Upgrade(tx *bolt.Tx, steps map[int]UpgradeFunc) error {
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return err
	}
	from := 0
	if v := meta.Get(keyVersion); v != nil {
		if from, err = strconv.Atoi(string(v)); err != nil {
			return fmt.Errorf("unreadable schema version %q: %w", v, err)
		}
	}
	if from > SchemaVersion {
		return fmt.Errorf("schema version %d is newer than this agent's %d; refusing to touch it", from, SchemaVersion)
	}
	for v := from; v < SchemaVersion; v++ {
		step, ok := steps[v]
		if !ok {
			return fmt.Errorf("no upgrade from schema version %d", v)
		}
		if err := step(tx); err != nil {
			return fmt.Errorf("upgrading schema version %d: %w", v, err)
		}
	}
	return meta.Put(keyVersion, []byte(strconv.Itoa(SchemaVersion)))
}

// Version returns the stored schema version.
func (b *BoltDB) Version() (int, error) {
	var v int
	err := b.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketMeta).Get(keyVersion)
		var err error
		v, err = strconv.Atoi(string(raw))
		return err
	})
	return v, err
}

func (b *BoltDB) GetVMI(uid string) (*VMI, error) {
	var out *VMI
	err := b.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketVMIs).Get([]byte(uid))
		if raw == nil {
			return fmt.Errorf("vmi record %s: %w", uid, ErrNotFound)
		}
		out = &VMI{}
		return json.Unmarshal(raw, out)
	})
	return out, err
}

func (b *BoltDB) GetVMIByKey(key string) (*VMI, error) {
	b.mu.Lock()
	uid, ok := b.keys.uid(key)
	b.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("vmi record of %s: %w", key, ErrNotFound)
	}
	return b.GetVMI(uid)
}

func (b *BoltDB) ListVMIs() ([]*VMI, error) {
	var out []*VMI
	err := b.db.View(func(tx *bolt.Tx) error {
		// bbolt iterates keys in byte order, which is the uid order.
		return tx.Bucket(bucketVMIs).ForEach(func(k, raw []byte) error {
			r := &VMI{}
			if err := json.Unmarshal(raw, r); err != nil {
				return fmt.Errorf("decoding vmi record %s: %w", k, err)
			}
			out = append(out, r)
			return nil
		})
	})
	return out, err
}

func (b *BoltDB) PutVMI(r *VMI) error {
	raw, err := r.encode()
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.keys.check(r.Key(), r.UID); err != nil {
		return err
	}
	if err := b.put(bucketVMIs, []byte(r.UID), raw); err != nil {
		return err
	}
	b.keys.put(r.Key(), r.UID)
	return nil
}

// put skips unchanged values, as Nomad's boltdd does: the handler saves
// records on every pass, and an unchanged write would still cost a sync.
func (b *BoltDB) put(bucket, key, raw []byte) error {
	same := false
	_ = b.db.View(func(tx *bolt.Tx) error {
		same = bytes.Equal(tx.Bucket(bucket).Get(key), raw)
		return nil
	})
	if same {
		return nil
	}
	return b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put(key, raw) })
}

func (b *BoltDB) DeleteVMI(uid string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketVMIs).Delete([]byte(uid)) }); err != nil {
		return err
	}
	b.keys.remove(uid)
	return nil
}

func (b *BoltDB) GetNode() (*Node, error) {
	out := &Node{}
	err := b.db.View(func(tx *bolt.Tx) error {
		raw := tx.Bucket(bucketNode).Get(keyState)
		if raw == nil {
			return nil
		}
		return json.Unmarshal(raw, out)
	})
	return out, err
}

func (b *BoltDB) PutNode(n *Node) error {
	raw, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("encoding node record: %w", err)
	}
	return b.put(bucketNode, keyState, raw)
}

func (b *BoltDB) Close() error { return b.db.Close() }
