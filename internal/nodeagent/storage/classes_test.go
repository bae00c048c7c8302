package storage

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	clocktesting "k8s.io/utils/clock/testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
)

// The room's decisions on what the CLIs answer, with the CLIs and the
// API faked (the real ones are exercised in internal/ceph and the e2e
// tests): a class whose cluster lets clients in without cephx is refused
// and its endpoints never reach the firewall; a reachable one gets its
// ceph.conf for QEMU and its endpoints let through.

type fakeAPI struct{ classes []*apiv1.StorageClass }

func (f *fakeAPI) List(context.Context, *apiv1.ListStorageClassesRequest, ...grpc.CallOption) (*apiv1.ListStorageClassesResponse, error) {
	return &apiv1.ListStorageClassesResponse{Items: f.classes}, nil
}

func (f *fakeAPI) Watch(context.Context, *apiv1.WatchStorageClassesRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[apiv1.StorageClassEvent], error) {
	return nil, errors.New("no watch here")
}

func (f *fakeAPI) Connect(_ context.Context, in *apiv1.ConnectStorageClassRequest, _ ...grpc.CallOption) (*apiv1.StorageClassConnection, error) {
	for _, c := range f.classes {
		if c.GetMetadata().GetName() == in.GetName() {
			return &apiv1.StorageClassConnection{StorageClass: c}, nil
		}
	}
	return nil, errors.New("no such class")
}

// fakeCLI answers the Ceph CLIs: noCephx makes a client offering no
// authentication get in; calls counts the calls.
type fakeCLI struct {
	noCephx bool
	calls   *atomic.Int32
}

func (f fakeCLI) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	if f.calls != nil {
		f.calls.Add(1)
	}
	cmd := strings.Join(args, " ")
	switch {
	case strings.Contains(cmd, "--auth-client-required none"):
		if f.noCephx {
			return []byte(`{"mons":[]}`), nil
		}
		return nil, &ceph.CLIError{Name: name, Stderr: "[errno 13] RADOS permission denied (error connecting to the cluster)", Err: errors.New("exit status 1")}
	case strings.HasSuffix(cmd, "ls --pool vp --format json"):
		return []byte(`[]`), nil
	case strings.HasSuffix(cmd, "mon dump --format json"):
		return []byte(`{"mons":[{"public_addrs":{"addrvec":[{"type":"v2","addr":"192.0.2.7:3300"},{"type":"v1","addr":"192.0.2.7:6789"}]}}]}`), nil
	case strings.HasSuffix(cmd, "osd dump --format json"):
		return []byte(`{"osds":[{"public_addrs":{"addrvec":[{"type":"v2","addr":"192.0.2.7:6800"}]}}]}`), nil
	}
	return nil, errors.New("unexpected " + name + " " + cmd)
}

type fakeFirewall struct {
	mu  sync.Mutex
	eps []netip.AddrPort
}

func (f *fakeFirewall) SetStorageEndpoints(_ context.Context, eps []netip.AddrPort) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.eps = slices.Clone(eps)
	return nil
}

func rbdClass(name string) *apiv1.StorageClass {
	return &apiv1.StorageClass{Metadata: &apiv1.ObjectMeta{Name: name}, Spec: &apiv1.StorageClassSpec{Rbd: &apiv1.RBDStorage{
		Monitors: []string{"192.0.2.7:3300"}, Pool: "vp", User: "vp", Key: "AQCauhZroSmaLxAADcjclatTLvDt1b2rQ3bj4Q=="}}}
}

func TestClassWithoutCephxIsRefused(t *testing.T) {
	for _, tc := range []struct {
		name    string
		noCephx bool
	}{{"cephx required", false}, {"no cephx", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fw := &fakeFirewall{}
			cs := New(Options{API: &fakeAPI{classes: []*apiv1.StorageClass{rbdClass("ceph")}}, Dir: filepath.Join(dir, "keys"),
				ConfDir: filepath.Join(dir, "ceph"), Firewall: fw, Runner: fakeCLI{noCephx: tc.noCephx}})
			cs.Sync(context.Background())
			cur, _ := cs.Report().Current()
			st := cur.GetItems()
			if len(st) != 1 {
				t.Fatalf("report %v", st)
			}
			c, err := cs.Lookup(context.Background(), "ceph")
			if tc.noCephx {
				if st[0].GetReady() || !strings.Contains(st[0].GetMessage(), "without cephx") || err == nil {
					t.Errorf("class of a cluster without cephx: %v (lookup: %v), want refused, saying why", st[0], err)
				}
				if len(fw.eps) != 0 {
					t.Errorf("its endpoints reached the firewall: %v", fw.eps)
				}
				return
			}
			if !st[0].GetReady() || err != nil {
				t.Fatalf("class: %v (lookup: %v), want ready", st[0], err)
			}
			want := []netip.AddrPort{netip.MustParseAddrPort("192.0.2.7:3300"), netip.MustParseAddrPort("192.0.2.7:6789"), netip.MustParseAddrPort("192.0.2.7:6800")}
			if !slices.Equal(fw.eps, want) {
				t.Errorf("firewall endpoints %v, want %v", fw.eps, want)
			}
			conf, err := os.ReadFile(c.ConfFile)
			if err != nil || string(conf) != string(ceph.QEMUConf()) {
				t.Errorf("QEMU's ceph.conf %s: %q, %v", c.ConfFile, conf, err)
			}
			if fi, err := os.Stat(c.ConfFile); err != nil || fi.Mode().Perm() != 0o644 {
				t.Errorf("QEMU's ceph.conf mode: %v, %v; want 0644 (QEMU's user reads it)", fi, err)
			}
			if got := c.RBDDisk("img").GetConfigFile(); got != c.ConfFile {
				t.Errorf("rbd disk's config file %q, want %q", got, c.ConfFile)
			}
		})
	}
}

// TestSyncProbesWhatChanged: a listing soon after the last (a watch event
// for another class) probes only the classes that are new or changed; the
// interval's listing probes them all again.
func TestSyncProbesWhatChanged(t *testing.T) {
	dir := t.TempDir()
	api := &fakeAPI{classes: []*apiv1.StorageClass{rbdClass("a")}}
	calls := &atomic.Int32{}
	clk := clocktesting.NewFakeClock(time.Now())
	cs := New(Options{API: api, Dir: filepath.Join(dir, "keys"), ConfDir: filepath.Join(dir, "ceph"),
		Runner: fakeCLI{calls: calls}, Interval: 30 * time.Second, Clock: clk})
	ctx := context.Background()
	cs.Sync(ctx)
	perClass := calls.Load()
	if perClass == 0 {
		t.Fatal("no CLI call for a new class")
	}
	// The server's status write for a: not a change to probe for.
	api.classes[0].Status = &apiv1.StorageClassStatus{Conditions: []*apiv1.Condition{{Type: apiv1.ConditionReady, Status: apiv1.ConditionTrue}}}
	api.classes = append(api.classes, rbdClass("b"))
	cs.Sync(ctx)
	if got := calls.Load() - perClass; got != perClass {
		t.Errorf("a class added: %d calls, want %d (the new class's only)", got, perClass)
	}
	changed := rbdClass("a")
	changed.Spec.Rbd.Pool = "other"
	api.classes[0] = changed
	before := calls.Load()
	cs.Sync(ctx)
	if got := calls.Load() - before; got == 0 {
		t.Error("a changed class was not probed again")
	}
	clk.Step(30 * time.Second)
	before = calls.Load()
	cs.Sync(ctx)
	// b in full, a up to its pool, which the fake does not know.
	if got := calls.Load() - before; got != perClass+1 {
		t.Errorf("the interval's listing made %d calls, want %d: both classes probed", got, perClass+1)
	}
}

// slowListAPI is fakeAPI whose first List answers with the classes of
// the moment it was called, but only once released.
type slowListAPI struct {
	*fakeAPI
	entered, release chan struct{}
	first            atomic.Bool
}

func (s *slowListAPI) List(ctx context.Context, in *apiv1.ListStorageClassesRequest, opts ...grpc.CallOption) (*apiv1.ListStorageClassesResponse, error) {
	resp, err := s.fakeAPI.List(ctx, in, opts...)
	if s.first.CompareAndSwap(false, true) {
		close(s.entered)
		<-s.release
	}
	return resp, err
}

// TestSlowSyncDoesNotUndoALaterOne: a listing that answers late (the
// interval's, slow) must not replace what a later listing (a lookup of a
// class made meanwhile) put in place, nor remove that class's key file.
func TestSlowSyncDoesNotUndoALaterOne(t *testing.T) {
	dir := t.TempDir()
	api := &slowListAPI{fakeAPI: &fakeAPI{}, entered: make(chan struct{}), release: make(chan struct{})}
	cs := New(Options{API: api, Dir: filepath.Join(dir, "keys"), ConfDir: filepath.Join(dir, "ceph"), Runner: fakeCLI{}})
	ctx := context.Background()
	slow := make(chan struct{})
	go func() { defer close(slow); cs.Sync(ctx) }()
	<-api.entered // listed: no class yet
	api.classes = []*apiv1.StorageClass{rbdClass("x")}
	looked := make(chan error, 1)
	go func() { _, err := cs.Lookup(ctx, "x"); looked <- err }()
	// The lookup's listing comes after the slow one's: it waits for it,
	// or, were the two let run side by side, it is done first (then the
	// slow one must not undo it). Either way the slow one is let go.
	var err error
	waited := false
	select {
	case err = <-looked:
	case <-time.After(time.Second):
		waited = true
	}
	close(api.release)
	<-slow
	if waited {
		err = <-looked
	}
	if err != nil {
		t.Fatalf("lookup of a class made meanwhile: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "keys", "x", "key")); err != nil {
		t.Errorf("the class's key file after the slow listing: %v", err)
	}
	cur, _ := cs.Report().Current()
	if items := cur.GetItems(); len(items) != 1 || items[0].GetClass() != "x" || !items[0].GetReady() {
		t.Errorf("report after the slow listing: %v, want class x ready", items)
	}
	cs.mu.Lock()
	_, ok := cs.classes["x"]
	cs.mu.Unlock()
	if !ok {
		t.Error("the slow listing dropped the class a later one found")
	}
}
