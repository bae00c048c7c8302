package command

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/etcdserver"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// startEtcd starts the embedded etcd the way serve does for dataDir.
func startEtcd(t *testing.T, dataDir string) *etcdserver.Server {
	t.Helper()
	s, err := etcdserver.Start(t.Context(), etcdserver.Config{
		DataDir: filepath.Join(dataDir, etcdserver.DirName),
		Logger:  slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// agentVMs is the VM store with serve's default key prefix.
func agentVMs(s *etcdserver.Server) store.Store[*apiv1.VirtualMachine] {
	return store.New(s.Client(), store.VirtualMachines, store.Options{Prefix: "/virtplane/registry"})
}

// storeCmd runs virtplane-agent args and returns its stdout.
func storeCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd, _ := newRootCommand(func(string) string { return "" })
	var out bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

func wantErr(t *testing.T, err error, substr string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), substr) {
		t.Errorf("error %v, want one saying %q", err, substr)
	}
}

func TestStoreSnapshotCommands(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	srv := startEtcd(t, dataDir)
	vms := agentVMs(srv)
	var before []*apiv1.VirtualMachine
	for _, name := range []string{"web", "db"} {
		vm, err := vms.Create(t.Context(), &apiv1.VirtualMachine{
			Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name},
			Spec:     &apiv1.VirtualMachineSpec{RunStrategy: "Halted"},
		})
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, vm)
	}
	backups := t.TempDir()
	file := filepath.Join(backups, "backup.db")

	// save, while the server runs.
	out, err := storeCmd(t, "store", "snapshot", "save", file, "--data-dir", dataDir)
	if err != nil {
		t.Fatal(err)
	}
	saved := regexp.MustCompile(`^snapshot saved to (\S+) \(revision (\d+), (\d+) keys, (\d+) bytes\)\n$`).FindStringSubmatch(out)
	if saved == nil || saved[1] != file || saved[3] != "2" {
		t.Errorf("save printed %q", out)
	}
	if fi, err := os.Stat(file); err != nil || saved != nil && saved[4] != strconv.FormatInt(fi.Size(), 10) {
		t.Errorf("snapshot file %v, %v; printed %q", fi, err, out)
	}
	if saved != nil && saved[2] != strconv.FormatInt(before[1].Metadata.ResourceVersion, 10) {
		t.Errorf("save printed revision %s, want %d", saved[2], before[1].Metadata.ResourceVersion)
	}

	// save from an "external" cluster: the same member through --etcd-endpoints.
	ext := filepath.Join(backups, "ext.db")
	if out, err := storeCmd(t, "store", "snapshot", "save", ext, "--etcd-endpoints", "unix://"+srv.SocketPath()); err != nil || !strings.HasPrefix(out, "snapshot saved to "+ext+" ") {
		t.Errorf("save --etcd-endpoints: %q, %v", out, err)
	}
	_, err = storeCmd(t, "store", "snapshot", "save", ext, "--etcd-endpoints", "unix://"+srv.SocketPath()+",unix:///nowhere")
	wantErr(t, err, "one endpoint")
	_, err = storeCmd(t, "store", "snapshot", "save", ext, "--data-dir", dataDir, "--etcd-endpoints", "unix://"+srv.SocketPath())
	wantErr(t, err, "give only one")
	_, err = storeCmd(t, "store", "snapshot", "save", ext, "--etcd-endpoints", "unix://"+srv.SocketPath(), "--etcd-ca-file", filepath.Join(backups, "missing.pem"))
	wantErr(t, err, "--etcd-ca-file")

	// status.
	out, err = storeCmd(t, "store", "snapshot", "status", file)
	if err != nil || !strings.HasPrefix(out, "snapshot "+file+": OK\n") || !strings.Contains(out, "keys:            2\n") {
		t.Errorf("status: %q, %v", out, err)
	}
	corrupt := filepath.Join(backups, "corrupt.db")
	data, _ := os.ReadFile(file)
	data[len(data)/2] ^= 1
	if err := os.WriteFile(corrupt, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = storeCmd(t, "store", "snapshot", "status", corrupt)
	wantErr(t, err, "corrupt")

	// restore refuses while the agent's etcd runs...
	_, err = storeCmd(t, "store", "snapshot", "restore", file, "--data-dir", dataDir)
	wantErr(t, err, "stop the agent")
	// ... and so does save once it is stopped, pointing at the cause.
	srv.Close()
	_, err = storeCmd(t, "store", "snapshot", "save", filepath.Join(backups, "late.db"), "--data-dir", dataDir)
	wantErr(t, err, "is the agent running")
	if _, err := os.Stat(filepath.Join(backups, "late.db")); err == nil {
		t.Error("failed save left a file")
	}
	// Stopped, but its data is still there.
	_, err = storeCmd(t, "store", "snapshot", "restore", file, "--data-dir", dataDir)
	wantErr(t, err, "mv "+filepath.Join(dataDir, "etcd"))
	// A corrupt snapshot leaves no data dir.
	fresh := filepath.Join(t.TempDir(), "fresh")
	_, err = storeCmd(t, "store", "snapshot", "restore", corrupt, "--data-dir", fresh)
	wantErr(t, err, "corrupt")
	if _, err := os.Stat(fresh); err == nil {
		t.Error("failed restore left the data dir")
	}

	out, err = storeCmd(t, "store", "snapshot", "restore", file, "--data-dir", fresh)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out, "snapshot "+file+" (revision ") || !strings.Contains(out, "restored into "+filepath.Join(fresh, "etcd")+"\nNext steps:\n") {
		t.Errorf("restore printed %q", out)
	}
	after, _, err := agentVMs(startEtcd(t, fresh)).List(t.Context(), store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// List sorts by name: db, web.
	if len(after) != 2 || !proto.Equal(after[0], before[1]) || !proto.Equal(after[1], before[0]) {
		t.Errorf("restored %v, want %v", after, before)
	}
}

// An operator who moves <data-dir>/etcd aside but forgets to stop the
// agent: the running etcd moved along with its socket and would keep
// writing, so restore must still refuse.
func TestStoreSnapshotRestoreRefusesMovedLiveEtcd(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	srv := startEtcd(t, dataDir)
	file := filepath.Join(t.TempDir(), "backup.db")
	if _, err := storeCmd(t, "store", "snapshot", "save", file, "--data-dir", dataDir); err != nil {
		t.Fatal(err)
	}
	etcdDir := filepath.Join(dataDir, "etcd")
	if err := os.Rename(etcdDir, etcdDir+".old"); err != nil {
		t.Fatal(err)
	}
	_, err := storeCmd(t, "store", "snapshot", "restore", file, "--data-dir", dataDir)
	wantErr(t, err, "an etcd is running on "+filepath.Join(etcdDir+".old", "etcd.sock"))
	if _, err := os.Stat(etcdDir); err == nil {
		t.Error("restore created the etcd dir")
	}

	srv.Close()
	if _, err := storeCmd(t, "store", "snapshot", "restore", file, "--data-dir", dataDir); err != nil {
		t.Errorf("restore after the agent stopped: %v", err)
	}
}
