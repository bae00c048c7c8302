package state

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Bucket layout, schema version 2:
//
//	meta/
//	    version -> "2"
//	vmis/
//	    <vmi uid> -> JSON VMI record
//	vmikeys/
//	    <namespace/name> \x00 <vmi uid> -> "" (index of vmis by key)
//	node/
//	    state -> JSON Node record
//
// A database written by a newer agent (higher version) is refused rather
// than misread; older ones are brought forward by Upgrade.

// SchemaVersion is the layout this code reads and writes.
const SchemaVersion = 2

var (
	bucketMeta    = []byte("meta")
	bucketVMIs    = []byte("vmis")
	bucketVMIKeys = []byte("vmikeys")
	bucketNode    = []byte("node")
	keyVersion    = []byte("version")
	keyState      = []byte("state")
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
	// Version 2 indexes the records by key, so the handler finds a VMI's
	// record without reading them all.
	1: func(tx *bolt.Tx) error {
		idx, err := tx.CreateBucketIfNotExists(bucketVMIKeys)
		if err != nil {
			return err
		}
		return tx.Bucket(bucketVMIs).ForEach(func(k, raw []byte) error {
			r := &VMI{}
			if err := json.Unmarshal(raw, r); err != nil {
				return fmt.Errorf("decoding vmi record %s: %w", k, err)
			}
			return idx.Put(keyIndex(r.Key(), r.UID), nil)
		})
	},
}

// keyIndex is the vmikeys entry of record uid with key: sorted by key,
// then uid, so a prefix scan finds a key's records in uid order.
func keyIndex(key, uid string) []byte { return []byte(key + "\x00" + uid) }

// BoltDB is the StateDB on a bbolt file.
type BoltDB struct {
	db *bolt.DB
}

var _ StateDB = (*BoltDB)(nil)

// OpenBolt opens (creating it if needed) the database at path and upgrades
// it to SchemaVersion. A second agent on the same file fails after a
// second instead of waiting for the lock forever.
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
	return &BoltDB{db: db}, nil
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
	var out *VMI
	err := b.db.View(func(tx *bolt.Tx) error {
		prefix := keyIndex(key, "")
		k, _ := tx.Bucket(bucketVMIKeys).Cursor().Seek(prefix)
		if k == nil || !bytes.HasPrefix(k, prefix) {
			return fmt.Errorf("vmi record of %s: %w", key, ErrNotFound)
		}
		uid := k[len(prefix):]
		raw := tx.Bucket(bucketVMIs).Get(uid)
		if raw == nil {
			return fmt.Errorf("vmi record %s, indexed for %s, is missing", uid, key)
		}
		out = &VMI{}
		return json.Unmarshal(raw, out)
	})
	return out, err
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
	if r.UID == "" {
		return errors.New("vmi record without uid")
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding vmi record %s: %w", r.UID, err)
	}
	if b.unchanged(bucketVMIs, []byte(r.UID), raw) {
		return nil
	}
	return b.db.Update(func(tx *bolt.Tx) error {
		vmis, idx := tx.Bucket(bucketVMIs), tx.Bucket(bucketVMIKeys)
		if err := unindex(vmis, idx, r.UID); err != nil {
			return err
		}
		if err := idx.Put(keyIndex(r.Key(), r.UID), nil); err != nil {
			return err
		}
		return vmis.Put([]byte(r.UID), raw)
	})
}

// unindex removes the index entry of the stored record uid, if any.
func unindex(vmis, idx *bolt.Bucket, uid string) error {
	raw := vmis.Get([]byte(uid))
	if raw == nil {
		return nil
	}
	old := &VMI{}
	if err := json.Unmarshal(raw, old); err != nil {
		return fmt.Errorf("decoding vmi record %s: %w", uid, err)
	}
	return idx.Delete(keyIndex(old.Key(), uid))
}

// unchanged reports whether key already holds raw. Writes skip unchanged
// values, as Nomad's boltdd does: the handler saves records on every
// pass, and an unchanged write would still cost a sync.
func (b *BoltDB) unchanged(bucket, key, raw []byte) bool {
	same := false
	_ = b.db.View(func(tx *bolt.Tx) error {
		same = bytes.Equal(tx.Bucket(bucket).Get(key), raw)
		return nil
	})
	return same
}

func (b *BoltDB) put(bucket, key, raw []byte) error {
	if b.unchanged(bucket, key, raw) {
		return nil
	}
	return b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucket).Put(key, raw) })
}

func (b *BoltDB) DeleteVMI(uid string) error {
	return b.db.Update(func(tx *bolt.Tx) error {
		vmis := tx.Bucket(bucketVMIs)
		if err := unindex(vmis, tx.Bucket(bucketVMIKeys), uid); err != nil {
			return err
		}
		return vmis.Delete([]byte(uid))
	})
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
