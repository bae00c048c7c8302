package state

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"slices"
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

// Records are found by namespace/name through the index, which follows
// puts that rename a record and deletes.
func TestVMIRecordsByKey(t *testing.T) {
	testDB(t, func(t *testing.T, db StateDB) {
		if _, err := db.GetVMIByKey("default/vm-a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("empty db: want ErrNotFound, got %v", err)
		}
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
		// A prefix of a key is not that key.
		if _, err := db.GetVMIByKey("default/vm-"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("key prefix: want ErrNotFound, got %v", err)
		}

		// The same uid under another name moves in the index.
		moved := record("a")
		moved.Namespace = "other"
		if err := db.PutVMI(moved); err != nil {
			t.Fatal(err)
		}
		if _, err := db.GetVMIByKey("default/vm-a"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("old key after a rename: want ErrNotFound, got %v", err)
		}
		if got, err := db.GetVMIByKey("other/vm-a"); err != nil || got.UID != "a" {
			t.Fatalf("new key after a rename: %+v, %v", got, err)
		}

		// A second record of a key (a VMI that reused a name): the lowest
		// uid first, the other once it is gone.
		newer := record("z")
		newer.Name = "vm-b"
		if err := db.PutVMI(newer); err != nil {
			t.Fatal(err)
		}
		if got, err := db.GetVMIByKey("default/vm-b"); err != nil || got.UID != "b" {
			t.Fatalf("shared key: %+v, %v; want uid b", got, err)
		}
		if err := db.DeleteVMI("b"); err != nil {
			t.Fatal(err)
		}
		if got, err := db.GetVMIByKey("default/vm-b"); err != nil || got.UID != "z" {
			t.Fatalf("shared key after deleting b: %+v, %v; want uid z", got, err)
		}
		if err := db.DeleteVMI("z"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.GetVMIByKey("default/vm-b"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted: want ErrNotFound, got %v", err)
		}
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
}

// A version 1 database (records, no key index) is indexed on open.
func TestUpgradeIndexesKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	raw, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := raw.Update(func(tx *bolt.Tx) error {
		if err := upgrades[0](tx); err != nil {
			return err
		}
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if err := meta.Put(keyVersion, []byte("1")); err != nil {
			return err
		}
		b, err := json.Marshal(record("old"))
		if err != nil {
			return err
		}
		return tx.Bucket(bucketVMIs).Put([]byte("old"), b)
	}); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	db, err := OpenBolt(path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if got, err := db.GetVMIByKey("default/vm-old"); err != nil || got.UID != "old" {
		t.Fatalf("record of a version 1 database by key: %+v, %v", got, err)
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
	steps := map[int]UpgradeFunc{}
	for v := range SchemaVersion {
		steps[v] = func(tx *bolt.Tx) error {
			ran = append(ran, v)
			return upgrades[v](tx)
		}
	}
	if err := raw.Update(func(tx *bolt.Tx) error { return Upgrade(tx, steps) }); err != nil {
		t.Fatal(err)
	}
	if want := []int{0, 1}; !slices.Equal(ran, want) {
		t.Fatalf("upgrade steps run: %v, want %v", ran, want)
	}
	// Already current: nothing runs.
	if err := raw.Update(func(tx *bolt.Tx) error { return Upgrade(tx, steps) }); err != nil || len(ran) != SchemaVersion {
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
