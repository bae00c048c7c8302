package etcdserver

import (
	"context"
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// The agent's own key layout, so the test reads what the agent would.
var agentStoreOptions = store.Options{Prefix: "/virtplane/registry"}

// startIn starts the embedded server the way the agent does for its data
// dir: in <dataDir>/etcd.
func startIn(t *testing.T, dataDir string) *Server {
	t.Helper()
	return start(t, filepath.Join(dataDir, DirName))
}

func vmStore(c *clientv3.Client) store.Store[*apiv1.VirtualMachine] {
	return store.New(c, store.VirtualMachines, agentStoreOptions)
}

func createVM(t *testing.T, s store.Store[*apiv1.VirtualMachine], name string) *apiv1.VirtualMachine {
	t.Helper()
	vm, err := s.Create(t.Context(), &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"v": "1"}},
		Spec:     &apiv1.VirtualMachineSpec{RunStrategy: "Halted"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return vm
}

// socketClient connects like an external tool: through the unix socket.
func socketClient(t *testing.T, s *Server) *clientv3.Client {
	t.Helper()
	c, err := Connect(t.Context(), []string{"unix://" + s.SocketPath()}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// makeSnapshot saves a snapshot of a fresh server holding one VM.
func makeSnapshot(t *testing.T) string {
	t.Helper()
	s := startIn(t, t.TempDir())
	createVM(t, vmStore(s.Client()), "a")
	path := filepath.Join(t.TempDir(), "snap.db")
	if _, err := SaveSnapshot(t.Context(), s.Client(), path); err != nil {
		t.Fatal(err)
	}
	s.Close()
	return path
}

func TestSnapshotSaveRestore(t *testing.T) {
	t.Parallel()
	src := startIn(t, t.TempDir())
	vms := vmStore(src.Client())
	var before []*apiv1.VirtualMachine
	for _, name := range []string{"vm0", "vm1", "vm2"} {
		before = append(before, createVM(t, vms, name))
	}
	srcMembers, err := src.Client().MemberList(t.Context())
	if err != nil {
		t.Fatal(err)
	}

	// While the server runs, through its socket, as the CLI does.
	path := filepath.Join(t.TempDir(), "backup.db")
	info, err := SaveSnapshot(t.Context(), socketClient(t, src), path)
	if err != nil {
		t.Fatal(err)
	}
	if last := before[2].Metadata.ResourceVersion; info.Revision != last {
		t.Errorf("snapshot revision %d, want %d (the last write)", info.Revision, last)
	}
	if info.TotalKeys != 3 {
		t.Errorf("snapshot has %d keys, want the 3 VMs", info.TotalKeys)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != info.Size {
		t.Errorf("snapshot file: %v, size %d, want %d", err, fi.Size(), info.Size)
	}
	if info.EtcdVersion == "" || info.StorageVersion == "" {
		t.Errorf("versions missing: %+v", info)
	}
	status, err := SnapshotStatus(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := (SnapshotInfo{info.Revision, info.TotalKeys, info.Size, info.Hash, info.StorageVersion, ""}); status != want {
		t.Errorf("SnapshotStatus = %+v, want %+v", status, want)
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("snapshot dir holds %v, want only the snapshot", entries)
	}

	// Later writes of every kind, none of which may survive the restore.
	createVM(t, vms, "late")
	if _, err := vms.GuaranteedUpdate(t.Context(), "default", "vm0", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		vm.Metadata.Labels["v"] = "2"
		return vm, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := vms.Delete(t.Context(), "default", "vm1", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	src.Close()

	dataDir := filepath.Join(t.TempDir(), "restored")
	if err := RestoreSnapshot(t.Context(), path, dataDir, Config{Logger: testLogger(t)}); err != nil {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dataDir); len(entries) != 1 || entries[0].Name() != DirName {
		t.Errorf("data dir holds %v, want only %s", entries, DirName)
	}
	dst := startIn(t, dataDir)
	after, _, err := vmStore(dst.Client()).List(t.Context(), store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("restored %d VMs, want %d: %v", len(after), len(before), after)
	}
	for i := range before {
		if !proto.Equal(after[i], before[i]) {
			t.Errorf("restored\n%v\nwant\n%v", after[i], before[i])
		}
	}

	// Same member identity, so the data is the embedded member's own.
	dstMembers, err := dst.Client().MemberList(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(dstMembers.Members) != 1 || dstMembers.Members[0].ID != srcMembers.Members[0].ID ||
		dstMembers.Members[0].Name != DefaultName || dstMembers.Members[0].PeerURLs[0] != PeerURL ||
		dstMembers.Header.ClusterId != srcMembers.Header.ClusterId {
		t.Errorf("restored members %v (cluster %x), want %v (cluster %x)",
			dstMembers.Members, dstMembers.Header.ClusterId, srcMembers.Members, srcMembers.Header.ClusterId)
	}

	// Revisions from after the snapshot are compacted, not reused.
	resp, err := dst.Client().Get(t.Context(), "x")
	if err != nil {
		t.Fatal(err)
	}
	if want := info.Revision + RestoreRevisionBump; resp.Header.Revision != want {
		t.Errorf("revision after restore %d, want %d", resp.Header.Revision, want)
	}
	if _, err := dst.Client().Get(t.Context(), "x", clientv3.WithRev(info.Revision+1)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Errorf("read at a pre-restore revision: %v, want %v", err, rpctypes.ErrCompacted)
	}
	if vm := createVM(t, vmStore(dst.Client()), "new"); vm.Metadata.ResourceVersion <= info.Revision+RestoreRevisionBump {
		t.Errorf("new write got resource version %d", vm.Metadata.ResourceVersion)
	}
}

func TestRestoreRefusesExistingDir(t *testing.T) {
	t.Parallel()
	path := makeSnapshot(t)
	dataDir := t.TempDir()
	etcdDir := filepath.Join(dataDir, DirName)
	if err := os.Mkdir(etcdDir, 0o700); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(etcdDir, "keep")
	if err := os.WriteFile(marker, []byte("live data"), 0o600); err != nil {
		t.Fatal(err)
	}

	err := RestoreSnapshot(t.Context(), path, dataDir, Config{Logger: testLogger(t)})
	if !errors.Is(err, fs.ErrExist) || !strings.Contains(err.Error(), "mv "+etcdDir) {
		t.Fatalf("restore over existing data: %v, want ErrExist saying how to move it aside", err)
	}
	if b, err := os.ReadFile(marker); err != nil || string(b) != "live data" {
		t.Errorf("existing data touched: %q, %v", b, err)
	}
	if entries, _ := os.ReadDir(dataDir); len(entries) != 1 {
		t.Errorf("data dir holds %v, want only the old %s", entries, DirName)
	}
	// An empty directory is just as refused: it may be a mount point.
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	if err := RestoreSnapshot(t.Context(), path, dataDir, Config{Logger: testLogger(t)}); !errors.Is(err, fs.ErrExist) {
		t.Errorf("restore into empty existing dir: %v, want ErrExist", err)
	}
}

func TestRestoreRefusesBadSnapshot(t *testing.T) {
	t.Parallel()
	good := makeSnapshot(t)
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	flipped := append([]byte(nil), data...)
	flipped[len(flipped)/2] ^= 0xff
	// Garbage with a valid trailer: the checksum passes, bbolt must not.
	garbage := make([]byte, 16384)
	for i := range garbage {
		garbage[i] = byte(i * 7)
	}
	sum := sha256.Sum256(garbage)
	garbage = append(garbage, sum[:]...)

	for name, content := range map[string][]byte{
		"bbolt, not etcd": boltFile(t, map[string]map[string]string{"foo": {"k": "v"}}),
		"flipped byte":    flipped,
		"truncated":       data[:len(data)-100],
		"no trailer":      data[:len(data)-sha256.Size],
		"not etcd":        []byte("hello\n"),
		"empty":           nil,
		"valid trailer":   garbage,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "bad.db")
			if err := os.WriteFile(path, content, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := SnapshotStatus(path); !errors.Is(err, ErrInvalidSnapshot) {
				t.Errorf("status: %v, want ErrInvalidSnapshot", err)
			}
			dataDir := filepath.Join(t.TempDir(), "new")
			err := RestoreSnapshot(t.Context(), path, dataDir, Config{Logger: testLogger(t)})
			t.Log(err) // what the operator reads
			if !errors.Is(err, ErrInvalidSnapshot) {
				t.Errorf("restore: %v, want ErrInvalidSnapshot", err)
			}
			if _, err := os.Stat(dataDir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("data dir left behind: %v", err)
			}
		})
	}

	t.Run("missing", func(t *testing.T) {
		t.Parallel()
		dataDir := filepath.Join(t.TempDir(), "new")
		err := RestoreSnapshot(t.Context(), filepath.Join(t.TempDir(), "nope.db"), dataDir, Config{})
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("restore: %v, want ErrNotExist", err)
		}
		if _, err := os.Stat(dataDir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("data dir left behind: %v", err)
		}
	})
}

// boltFile returns a bbolt database with buckets and a valid sha256
// trailer: a file that passes the checksum but is no etcd snapshot.
func boltFile(t *testing.T, buckets map[string]map[string]string) []byte {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bolt.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for name, kvs := range buckets {
			b, err := tx.CreateBucket([]byte(name))
			if err != nil {
				return err
			}
			for k, v := range kvs {
				if err := b.Put([]byte(k), []byte(v)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return append(data, sum[:]...)
}

// A snapshot that passes verification but breaks the restore half-way
// (etcdutl panics on a member key it cannot parse, after the temporary
// directory exists) leaves nothing: neither the temporary directory nor
// the data dirs the restore created.
func TestRestoreFailureLeavesNothing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "odd.db")
	content := boltFile(t, map[string]map[string]string{"meta": {}, "members": {"not-an-id": "{}"}})
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := SnapshotStatus(path); err != nil {
		t.Fatalf("status: %v; the test needs a file that passes it", err)
	}

	parent := t.TempDir()
	dataDir := filepath.Join(parent, "a", "b")
	if err := RestoreSnapshot(t.Context(), path, dataDir, Config{Logger: testLogger(t)}); err == nil {
		t.Fatal("restore succeeded")
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Errorf("left behind in %s: %v", parent, entries)
	}

	// An existing data dir (the agent's, holding pki/ etc.) stays as it was.
	if err := RestoreSnapshot(t.Context(), path, parent, Config{Logger: testLogger(t)}); err == nil {
		t.Fatal("restore succeeded")
	}
	if _, err := os.Stat(parent); err != nil {
		t.Errorf("existing data dir: %v", err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Errorf("left behind in %s: %v", parent, entries)
	}
}

// Config.DataDir, when set, must be the directory the restore creates: a
// caller passing the agent's data dir there would restore somewhere the
// server never looks.
func TestRestoreArguments(t *testing.T) {
	t.Parallel()
	path := makeSnapshot(t)
	dataDir := t.TempDir()
	err := RestoreSnapshot(t.Context(), path, dataDir, Config{DataDir: filepath.Join(dataDir, "other")})
	if err == nil || !strings.Contains(err.Error(), "is not") {
		t.Errorf("mismatched Config.DataDir: %v", err)
	}
	if err := RestoreSnapshot(t.Context(), path, dataDir, Config{DataDir: filepath.Join(dataDir, DirName), Logger: testLogger(t)}); err != nil {
		t.Errorf("matching Config.DataDir: %v", err)
	}

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := RestoreSnapshot(t.Context(), path, filepath.Join(file, "data"), Config{}); err == nil {
		t.Error("restore under a file succeeded")
	}
}

func TestSaveSnapshotFailureKeepsOldFile(t *testing.T) {
	t.Parallel()
	s := startIn(t, t.TempDir())
	createVM(t, vmStore(s.Client()), "a")
	dir := t.TempDir()
	path := filepath.Join(dir, "backup.db")
	if err := os.WriteFile(path, []byte("previous backup"), 0o600); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := SaveSnapshot(ctx, s.Client(), path); !errors.Is(err, context.Canceled) {
		t.Errorf("save with cancelled context: %v, want context.Canceled", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "previous backup" {
		t.Errorf("old backup replaced by %d bytes", len(b))
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("dir holds %v, want only the old backup", entries)
	}
	if _, err := SaveSnapshot(t.Context(), s.Client(), filepath.Join(dir, "missing", "backup.db")); err == nil {
		t.Error("save into a missing directory succeeded")
	}

	// A successful save replaces it.
	if _, err := SaveSnapshot(t.Context(), s.Client(), path); err != nil {
		t.Fatal(err)
	}
	if _, err := SnapshotStatus(path); err != nil {
		t.Error(err)
	}
}
