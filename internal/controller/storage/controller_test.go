package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/controllertest"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
)

// cephScript plays the Ceph CLIs: a pool's images (with watchers and
// snapshots) and the blocklist, recording every call.
type cephScript struct {
	mu        sync.Mutex
	images    map[string]bool
	watchers  map[string]bool
	snaps     map[string]bool
	blocklist map[string]bool
	down      bool // every call times out, as with a silent monitor
	calls     []string
}

func (s *cephScript) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The connection's own arguments end with --no-mon-config.
	i := slices.Index(args, "--no-mon-config")
	op := args[i+1:]
	s.calls = append(s.calls, name+" "+strings.Join(op, " "))
	if s.down {
		return nil, errors.New("timed out")
	}
	switch {
	case name == "rbd" && op[0] == "ls" && op[1] == "-l":
		var entries []ceph.Entry
		for _, n := range slices.Sorted(maps.Keys(s.images)) {
			entries = append(entries, ceph.Entry{Image: n})
			if s.snaps[n] {
				entries = append(entries, ceph.Entry{Image: n, Snapshot: "snap-x"})
			}
		}
		return json.Marshal(entries)
	case name == "rbd" && op[0] == "ls": // the probe
		return json.Marshal(slices.Sorted(maps.Keys(s.images)))
	case name == "rbd" && op[0] == "rm":
		// As rbd refuses: an image open (a watcher) or with snapshots.
		img := strings.TrimPrefix(op[len(op)-1], "vp/")
		if s.watchers[img] {
			return nil, &ceph.CLIError{Name: "rbd", Stderr: "rbd: error: image still has watchers\nrbd: delete error: (16) Device or resource busy", Err: errors.New("exit status 16")}
		}
		if s.snaps[img] {
			return nil, &ceph.CLIError{Name: "rbd", Stderr: "rbd: image has snapshots - not removing\nrbd: delete error: (39) Directory not empty", Err: errors.New("exit status 39")}
		}
		delete(s.images, img)
		return nil, nil
	case name == "ceph" && op[2] == "add":
		s.blocklist[op[3]] = true
		return nil, nil
	case name == "ceph" && op[2] == "rm":
		delete(s.blocklist, op[3])
		return nil, nil
	}
	return nil, fmt.Errorf("unscripted: %s %v", name, op)
}

const (
	uidLive = "11111111-1111-4111-8111-111111111111"
	uidGone = "22222222-2222-4222-8222-222222222222"
)

type fixture struct {
	t       *testing.T
	now     time.Time
	ceph    *cephScript
	classes controllertest.Cache[*apiv1.StorageClass]
	nodes   controllertest.Cache[*apiv1.Node]
	vms     controllertest.Cache[*apiv1.VirtualMachine]
	c       *Controller
}

func newFixture(t *testing.T) *fixture {
	f := &fixture{t: t, now: time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC), ceph: &cephScript{
		images: map[string]bool{}, watchers: map[string]bool{}, snaps: map[string]bool{}, blocklist: map[string]bool{},
	}}
	clock := func() time.Time { return f.now }
	db := memstore.NewDB(clock)
	f.classes = controllertest.NewCache(db, store.StorageClasses, &apiv1.StorageClass{
		Metadata: &apiv1.ObjectMeta{Name: "ceph"},
		Spec: &apiv1.StorageClassSpec{Rbd: &apiv1.RBDStorage{Monitors: []string{"169.254.7.254:3300"}, Pool: "vp", User: "vp",
			Key: "AQCauhZroSmaLxAADcjclatTLvDt1b2rQ3bj4Q=="}},
	})
	f.nodes = controllertest.NewCache(db, store.Nodes, &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Name: "a"},
		Status:   &apiv1.NodeStatus{Registrations: 1, Storage: []*apiv1.NodeStorage{{Class: "ceph", Ready: true, Address: "169.254.7.1"}}},
	})
	f.vms = controllertest.NewCache(db, store.VirtualMachines, &apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "live", Uid: uidLive}})
	f.c = New(Options{Dir: t.TempDir(), Runner: f.ceph, Clock: clock}, f.classes.Informer, f.nodes.Informer, f.classes.Store, controllertest.Discard())
	f.sync()
	return f
}

func (f *fixture) sync() {
	f.classes.Sync(f.t)
	f.nodes.Sync(f.t)
	f.vms.Sync(f.t)
}

func (f *fixture) reconcile() {
	f.t.Helper()
	if _, err := f.c.Reconcile(context.Background(), "ceph"); err != nil {
		f.t.Fatal(err)
	}
	f.sync()
}

func (f *fixture) class() *apiv1.StorageClass { return f.classes.Get(f.t, "", "ceph") }

func TestFenceRecordsThenBlocklistsAndLiftsOnRegistration(t *testing.T) {
	f := newFixture(t)
	node := f.nodes.Get(t, "", "a")
	if err := f.c.Fence(context.Background(), node, []string{"ceph"}); err != nil {
		t.Fatal(err)
	}
	f.sync()
	if !f.ceph.blocklist["169.254.7.1:0/0"] {
		t.Fatalf("blocklist %v", f.ceph.blocklist)
	}
	fences := f.class().GetStatus().GetFences()
	if len(fences) != 1 || fences[0].GetNode() != "a" || fences[0].GetAddress() != "169.254.7.1" || fences[0].GetRegistrations() != 1 {
		t.Fatalf("fences %v", fences)
	}
	// Heartbeats (no registration) lift nothing.
	f.reconcile()
	if len(f.class().GetStatus().GetFences()) != 1 || !f.ceph.blocklist["169.254.7.1:0/0"] {
		t.Fatal("lifted without a registration")
	}
	f.nodes.Update(t, "", "a", func(n *apiv1.Node) { n.Status.Registrations++ })
	f.sync()
	f.reconcile()
	if len(f.class().GetStatus().GetFences()) != 0 || f.ceph.blocklist["169.254.7.1:0/0"] {
		t.Fatalf("after the registration: fences %v, blocklist %v", f.class().GetStatus().GetFences(), f.ceph.blocklist)
	}
}

func TestFenceFailsWithoutAddressOrCeph(t *testing.T) {
	f := newFixture(t)
	node := f.nodes.Get(t, "", "a")
	node.Status.Storage = nil
	if err := f.c.Fence(context.Background(), node, []string{"ceph"}); err == nil || !strings.Contains(err.Error(), "no address") {
		t.Fatalf("fence without an address: %v", err)
	}
	f.ceph.down = true
	if err := f.c.Fence(context.Background(), f.nodes.Get(t, "", "a"), []string{"ceph"}); err == nil {
		t.Fatal("fence with Ceph down succeeded")
	}
	if err := f.c.Fence(context.Background(), f.nodes.Get(t, "", "a"), []string{"missing"}); err == nil {
		t.Fatal("fence on a class that does not exist succeeded")
	}
}

func TestDeletedNodesFenceIsLifted(t *testing.T) {
	f := newFixture(t)
	if err := f.c.Fence(context.Background(), f.nodes.Get(t, "", "a"), []string{"ceph"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.nodes.Store.Delete(context.Background(), "", "a", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.sync()
	f.reconcile()
	if len(f.class().GetStatus().GetFences()) != 0 || len(f.ceph.blocklist) != 0 {
		t.Fatalf("after the node's deletion: fences %v, blocklist %v", f.class().GetStatus().GetFences(), f.ceph.blocklist)
	}
}

func TestDeletedVMsImagesCollectedAfterTheGrace(t *testing.T) {
	f := newFixture(t)
	db := memstore.NewDB(func() time.Time { return f.now })
	contents := controllertest.NewCache(db, store.SnapshotContents)
	restores := controllertest.NewCache(db, store.Restores)
	snaps := controllertest.NewCache(db, store.Snapshots)
	v := NewVolumes(f.c, VolumeOptions{Grace: 10 * time.Second}, contents.Informer, restores.Informer, snaps.Informer, f.vms.Informer,
		contents.Store, restores.Store, controllertest.Discard())
	contents.Sync(t)
	restores.Sync(t)
	snaps.Sync(t)
	for _, img := range []string{
		"vm-" + uidLive + "-vol-data", "vm-" + uidGone + "-vol-data", "vm-" + uidGone + "-nvram",
		"vm-" + uidGone + "-vol-open", "vm-" + uidGone + "-vol-snapped", "img-abc", "someone-elses",
	} {
		f.ceph.images[img] = true
	}
	f.ceph.watchers["vm-"+uidGone+"-vol-open"] = true
	f.ceph.snaps["vm-"+uidGone+"-vol-snapped"] = true
	collect := func() controller.Result {
		t.Helper()
		res, err := v.Reconcile(context.Background(), keyCollect+"ceph")
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := collect(); len(f.ceph.images) != 7 || res.RequeueAfter != 10*time.Second {
		t.Fatalf("first look: images %v, requeue %v (want all kept, a look again at the grace)", f.ceph.images, res.RequeueAfter)
	}
	f.now = f.now.Add(5 * time.Second)
	if collect(); len(f.ceph.images) != 7 {
		t.Fatalf("removed within the grace: %v", f.ceph.images)
	}
	f.now = f.now.Add(5 * time.Second)
	res := collect()
	left := slices.Sorted(maps.Keys(f.ceph.images))
	want := []string{"img-abc", "someone-elses", "vm-" + uidLive + "-vol-data", "vm-" + uidGone + "-vol-open", "vm-" + uidGone + "-vol-snapped"}
	if !slices.Equal(left, want) {
		t.Fatalf("after the grace: %v\nwant %v", left, want)
	}
	// The open one is still due: looked at again at the interval.
	if res.RequeueAfter != time.Minute {
		t.Fatalf("requeue %v, want the collect interval", res.RequeueAfter)
	}
	// Its QEMU goes: removed at the next pass, with no new grace.
	delete(f.ceph.watchers, "vm-"+uidGone+"-vol-open")
	if collect(); f.ceph.images["vm-"+uidGone+"-vol-open"] {
		t.Fatal("the closed image of the deleted VM is still there")
	}
}

func TestClassReadyFollowsTheProbe(t *testing.T) {
	f := newFixture(t)
	f.reconcile()
	if r := apiv1.FindCondition(f.class().GetStatus().GetConditions(), apiv1.ConditionReady); r.GetStatus() != apiv1.ConditionTrue {
		t.Fatalf("Ready %v", r)
	}
	f.ceph.down = true
	f.reconcile()
	r := apiv1.FindCondition(f.class().GetStatus().GetConditions(), apiv1.ConditionReady)
	if r.GetStatus() != apiv1.ConditionFalse || r.GetReason() != ReasonUnreachable {
		t.Fatalf("Ready with Ceph down %v", r)
	}
	for _, c := range f.ceph.calls {
		if strings.Contains(c, "AQCauhZ") {
			t.Fatalf("a call carries the key: %s", c)
		}
	}
}
