package state

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
)

var (
	_ StateDB = (*BoltDB)(nil)
	_ StateDB = (*MemDB)(nil)
)

// testDB runs the same test body against every implementation (Nomad's
// client/state testDB).
func testDB(t *testing.T, fn func(t *testing.T, db StateDB)) {
	t.Run("bolt", func(t *testing.T) {
		db, err := OpenBolt(filepath.Join(t.TempDir(), "state.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		fn(t, db)
	})
	t.Run("mem", func(t *testing.T) {
		fn(t, NewMemDB())
	})
}

func record(uid string) *VMI {
	return &VMI{
		UID: uid, Namespace: "default", Name: "vm-" + uid, DomainName: "default_vm-" + uid,
		Handle: launcher.Handle{Version: launcher.HandleVersion, VMIUID: uid, VMIKey: "default/vm-" + uid,
			DomainName: "default_vm-" + uid, Protocol: "grpc", ProtocolVersion: 1, Network: "unix",
			Addr: "/run/virtplane/launcher-" + uid + ".sock", Pid: 4242},
		GracePeriodSeconds: 30, NodeFailurePolicy: "RestartElsewhere", Dir: "/var/lib/virtplane/node/vmis/" + uid,
		CreatedAt: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

func TestVMIRecords(t *testing.T) {
	testDB(t, func(t *testing.T, db StateDB) {
		if _, err := db.GetVMI("nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("missing record: want ErrNotFound, got %v", err)
		}
		if list, err := db.ListVMIs(); err != nil || len(list) != 0 {
			t.Fatalf("empty db lists %v, %v", list, err)
		}
		b, a := record("b"), record("a")
		for _, r := range []*VMI{b, a} {
			if err := db.PutVMI(r); err != nil {
				t.Fatal(err)
			}
		}
		got, err := db.GetVMI("a")
		if err != nil {
			t.Fatal(err)
		}
		if got.Handle != a.Handle || got.GracePeriodSeconds != 30 || !got.CreatedAt.Equal(a.CreatedAt) ||
			got.NodeFailurePolicy != "RestartElsewhere" || got.Key() != "default/vm-a" || !got.HasLauncher() {
			t.Fatalf("round trip: got %+v, want %+v", got, a)
		}
		// The caller's copy is not the stored one.
		got.GracePeriodSeconds = 1
		if again, _ := db.GetVMI("a"); again.GracePeriodSeconds != 30 {
			t.Fatal("a returned record aliases the stored one")
		}

		a.ShutdownStartedAt = time.Date(2025, 1, 2, 3, 5, 0, 0, time.UTC)
		a.GracePeriodSeconds = 0
		if err := db.PutVMI(a); err != nil {
			t.Fatal(err)
		}
		if err := db.PutVMI(a); err != nil { // unchanged: no error either
			t.Fatal(err)
		}
		list, err := db.ListVMIs()
		if err != nil {
			t.Fatal(err)
		}
		if len(list) != 2 || list[0].UID != "a" || list[1].UID != "b" {
			t.Fatalf("list not sorted by uid: %+v", list)
		}
		if !list[0].ShutdownStartedAt.Equal(a.ShutdownStartedAt) || list[0].GracePeriodSeconds != 0 {
			t.Fatalf("update lost: %+v", list[0])
		}

		if err := db.DeleteVMI("a"); err != nil {
			t.Fatal(err)
		}
		if err := db.DeleteVMI("a"); err != nil {
			t.Fatalf("deleting a missing record: %v", err)
		}
		if _, err := db.GetVMI("a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted record: want ErrNotFound, got %v", err)
		}
		if err := db.PutVMI(&VMI{}); err == nil {
			t.Fatal("a record without uid was accepted")
		}
	})
}

// wantByKey checks what GetVMIByKey finds for key: the record of uid, or
// none (ErrNotFound) when uid is "".
func wantByKey(t *testing.T, db StateDB, key, uid string) {
	t.Helper()
	got, err := db.GetVMIByKey(key)
	if uid == "" {
		if !errors.Is(err, ErrNotFound) {
			t.Fatalf("%s: want ErrNotFound, got %+v, %v", key, got, err)
		}
		return
	}
	if err != nil || got.UID != uid {
		t.Fatalf("%s: %+v, %v; want uid %s", key, got, err, uid)
	}
}

// Records are found by namespace/name through the index, which follows
// puts and deletes; a key has one record at a time.
func TestVMIRecordsByKey(t *testing.T) {
	testDB(t, func(t *testing.T, db StateDB) {
		wantByKey(t, db, "default/vm-a", "") // empty db
		for _, uid := range []string{"b", "a", "c"} {
			if err := db.PutVMI(record(uid)); err != nil {
				t.Fatal(err)
			}
		}
		for _, uid := range []string{"a", "b", "c"} {
			got, err := db.GetVMIByKey("default/vm-" + uid)
			if err != nil || got.UID != uid || got.Handle != record(uid).Handle {
				t.Fatalf("by key vm-%s: %+v, %v", uid, got, err)
			}
		}
		wantByKey(t, db, "default/vm-", "") // a prefix of a key is not that key

		// A VMI that reused a name (uid z for vm-b) is recorded only once
		// the old record is gone: a second record of a key is refused.
		newer := record("z")
		newer.Name = "vm-b"
		if err := db.PutVMI(newer); err == nil {
			t.Fatal("a second record of default/vm-b was accepted")
		}
		wantByKey(t, db, "default/vm-b", "b")
		if _, err := db.GetVMI("z"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("refused record stored: %v", err)
		}
		if err := db.DeleteVMI("b"); err != nil {
			t.Fatal(err)
		}
		if err := db.PutVMI(newer); err != nil {
			t.Fatal(err)
		}
		wantByKey(t, db, "default/vm-b", "z")
		if err := db.DeleteVMI("z"); err != nil {
			t.Fatal(err)
		}
		wantByKey(t, db, "default/vm-b", "")
	})
}

func TestNodeRecord(t *testing.T) {
	testDB(t, func(t *testing.T, db StateDB) {
		n, err := db.GetNode()
		if err != nil || !n.LeaseExpiry.IsZero() {
			t.Fatalf("fresh node record: %+v, %v", n, err)
		}
		exp := time.Date(2025, 1, 2, 3, 4, 5, 6, time.UTC)
		if err := db.PutNode(&Node{LeaseExpiry: exp}); err != nil {
			t.Fatal(err)
		}
		n, err = db.GetNode()
		if err != nil || !n.LeaseExpiry.Equal(exp) {
			t.Fatalf("node record: %+v, %v", n, err)
		}
	})
}

// The bolt file keeps records across a close and reopen (an agent restart).
func TestBoltSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.PutVMI(record("x")); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, err := db.Version(); err != nil || v != SchemaVersion {
		t.Fatalf("version %d, %v", v, err)
	}
	if r, err := db.GetVMI("x"); err != nil || r.Handle.Pid != 4242 {
		t.Fatalf("after reopen: %+v, %v", r, err)
	}
	// The key index is rebuilt from the records, deletes included.
	wantByKey(t, db, "default/vm-x", "x")
	if err := db.DeleteVMI("x"); err != nil {
		t.Fatal(err)
	}
	wantByKey(t, db, "default/vm-x", "")
}

// A file with two records of one key (which PutVMI never writes) is
// refused rather than half indexed.
func TestBoltRefusesSharedKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	raw, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Update(func(tx *bolt.Tx) error {
		if err := Upgrade(tx, upgrades); err != nil {
			return err
		}
		for _, uid := range []string{"a", "z"} {
			r := record(uid)
			r.Name = "vm-a"
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			if err := tx.Bucket(bucketVMIs).Put([]byte(uid), b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if db, err := OpenBolt(path); err == nil || !strings.Contains(err.Error(), "default/vm-a") {
		if db != nil {
			db.Close()
		}
		t.Fatalf("two records of default/vm-a: want a refusal naming the key, got %v", err)
	}
}

// A second agent on the same file fails instead of hanging on the lock.
func TestBoltLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := OpenBolt(path); err == nil {
		t.Fatal("second open of a locked database succeeded")
	}
}

func TestUpgrade(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	raw, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	// A database from before versioning: no meta bucket.
	var ran []int
	steps := map[int]UpgradeFunc{0: func(tx *bolt.Tx) error {
		ran = append(ran, 0)
		return upgrades[0](tx)
	}}
	if err := raw.Update(func(tx *bolt.Tx) error { return Upgrade(tx, steps) }); err != nil {
		t.Fatal(err)
	}
	if len(ran) != 1 {
		t.Fatalf("upgrade steps run: %v", ran)
	}
	// Already current: nothing runs.
	if err := raw.Update(func(tx *bolt.Tx) error { return Upgrade(tx, steps) }); err != nil || len(ran) != 1 {
		t.Fatalf("second upgrade: ran %v, %v", ran, err)
	}
	// A newer agent's database is refused.
	if err := raw.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyVersion, []byte("99"))
	}); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if _, err := OpenBolt(path); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("newer schema: want a refusal, got %v", err)
	}
	// A missing step is an error, not a silent skip.
	raw, err = bolt.Open(filepath.Join(t.TempDir(), "other.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if err := raw.Update(func(tx *bolt.Tx) error { return Upgrade(tx, nil) }); err == nil {
		t.Fatal("upgrade without steps succeeded")
	}
}
