package nsusage

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"
	testclock "k8s.io/utils/clock/testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nsquota"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

type env struct {
	vms, plainVMs store.Store[*apiv1.VirtualMachine]
	vmis          store.Store[*apiv1.VirtualMachineInstance]
	images        store.Store[*apiv1.Image]
	snaps         store.Store[*apiv1.VirtualMachineSnapshot]
	nss, plainNSs store.Store[*apiv1.Namespace]
	rec           *Reconciler
}

// newEnv has accounting stores, as the server's, and plain ones that
// write past accounting, as objects from before it did.
func newEnv(t *testing.T, c *clientv3.Client, opts Options) *env {
	prefix := storetest.Prefix(t)
	acct := store.Options{Prefix: prefix, Accounting: true}
	plain := store.Options{Prefix: prefix}
	e := &env{
		vms:      store.New(c, store.VirtualMachines, acct),
		plainVMs: store.New(c, store.VirtualMachines, plain),
		vmis:     store.New(c, store.VirtualMachineInstances, acct),
		images:   store.New(c, store.Images, acct),
		snaps:    store.New(c, store.Snapshots, plain),
		nss:      store.New(c, store.Namespaces, acct),
		plainNSs: store.New(c, store.Namespaces, plain),
	}
	e.rec = New(Sources{Namespaces: e.nss, VMs: e.vms, VMIs: e.vmis, Images: e.images,
		Occupied: []func(context.Context) ([]string, error){NamespacesOf[*apiv1.VirtualMachineSnapshot](e.snaps)}}, opts)
	return e
}

func vm(ns, name string, cores int32) *apiv1.VirtualMachine {
	return &apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{Namespace: ns, Name: name}, Spec: &apiv1.VirtualMachineSpec{
		Template: &apiv1.VirtualMachineInstanceTemplateSpec{Spec: &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{
			Cpu: &apiv1.CPU{Cores: cores}, Memory: &apiv1.Memory{Guest: "1Gi"}}}}}}
}

func used(t *testing.T, e *env, ns string) nsquota.Usage {
	t.Helper()
	obj, err := e.nss.Get(t.Context(), "", ns)
	if err != nil {
		t.Fatal(err)
	}
	return nsquota.FromAPI(obj.GetStatus().GetUsed())
}

func mustCreate[T store.Object](t *testing.T, s store.Store[T], obj T) {
	t.Helper()
	if _, err := s.Create(t.Context(), obj); err != nil {
		t.Fatal(err)
	}
}

// drift sets namespace ns's recorded usage past accounting.
func drift(t *testing.T, e *env, ns string, u nsquota.Usage) {
	t.Helper()
	if _, err := e.plainNSs.GuaranteedUpdate(t.Context(), "", ns, func(n *apiv1.Namespace) (*apiv1.Namespace, error) {
		n.Status = &apiv1.NamespaceStatus{Used: u.ToAPI()}
		return n, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// An upgraded cluster: objects stored before accounting get their
// namespaces, with their usage; a drifted usage is repaired; one that is
// right is not rewritten.
func TestReconcileBackfillsAndRepairs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.Client(t), Options{})
	ctx := t.Context()
	mustCreate(t, e.plainVMs, vm("old", "a", 2))
	mustCreate(t, e.plainVMs, vm("old", "b", 1))
	mustCreate(t, e.snaps, &apiv1.VirtualMachineSnapshot{Metadata: &apiv1.ObjectMeta{Namespace: "snaps", Name: "s"}})
	mustCreate(t, e.vms, vm("new", "c", 4))
	mustCreate(t, e.plainVMs, vm("new", "untracked", 1))
	mustCreate(t, e.vms, vm("right", "d", 1))
	right, err := e.nss.Get(ctx, "", "right")
	if err != nil {
		t.Fatal(err)
	}

	if err := e.rec.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := used(t, e, "old"), (nsquota.Usage{VCPUs: 3, Memory: 2 << 30, VMs: 2}); !got.Equal(want) {
		t.Errorf("backfilled namespace old uses %v, want %v", got, want)
	}
	if got := used(t, e, "snaps"); !got.IsZero() {
		t.Errorf("namespace of a snapshot uses %v", got)
	}
	if got, want := used(t, e, "new"), (nsquota.Usage{VCPUs: 5, Memory: 2 << 30, VMs: 2}); !got.Equal(want) {
		t.Errorf("repaired namespace new uses %v, want %v", got, want)
	}
	again, err := e.nss.Get(ctx, "", "right")
	if err != nil {
		t.Fatal(err)
	}
	if again.Metadata.ResourceVersion != right.Metadata.ResourceVersion {
		t.Errorf("a namespace whose usage was right was rewritten")
	}
}

// A charge that lands while the reconciler reads is never lost: its write
// fails the pass's compare for that namespace, and the next pass, with
// nothing in between, repairs the drift.
func TestReconcileKeepsConcurrentCharge(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.Client(t), Options{})
	ctx := t.Context()
	mustCreate(t, e.vms, vm("a", "first", 1))
	drift(t, e, "a", nsquota.Usage{VCPUs: 50, VMs: 9})
	e.rec.afterRead = func() {
		e.rec.afterRead = nil
		mustCreate(t, e.vms, vm("a", "racer", 2))
	}
	if err := e.rec.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	// The racer's charge stands on the drifted usage: not overwritten by
	// a sum that might not count it.
	if got, want := used(t, e, "a"), (nsquota.Usage{VCPUs: 52, Memory: 1 << 30, VMs: 10}); !got.Equal(want) {
		t.Fatalf("after a pass with a concurrent charge: %v, want the drift plus the charge %v", got, want)
	}
	if err := e.rec.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := used(t, e, "a"), (nsquota.Usage{VCPUs: 3, Memory: 2 << 30, VMs: 2}); !got.Equal(want) {
		t.Fatalf("after a quiet pass: %v, want %v", got, want)
	}
}

// Replica sets' instances and namespaces' images are counted; VMs'
// instances are not (their VM is).
func TestReconcileCountsInstancesAndImages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, storetest.Client(t), Options{})
	ctx := t.Context()
	spec := vm("a", "x", 2).Spec.Template.Spec
	mustCreate(t, e.vmis, &apiv1.VirtualMachineInstance{Metadata: &apiv1.ObjectMeta{Namespace: "a", Name: "rs-1"}, Spec: spec})
	mustCreate(t, e.vmis, &apiv1.VirtualMachineInstance{Metadata: &apiv1.ObjectMeta{Namespace: "a", Name: "vm",
		OwnerReferences: []*apiv1.OwnerReference{{Kind: apiv1.KindVirtualMachine, Uid: "u", Controller: true}}}, Spec: spec})
	mustCreate(t, e.images, &apiv1.Image{Metadata: &apiv1.ObjectMeta{Name: "img", Labels: map[string]string{apiv1.LabelOwnerNamespace: "a"}}})
	mustCreate(t, e.images, &apiv1.Image{Metadata: &apiv1.ObjectMeta{Name: "cluster"}})
	want := nsquota.Usage{VCPUs: 2, Memory: 1 << 30, VMs: 1, Images: 1}
	if got := used(t, e, "a"); !got.Equal(want) {
		t.Fatalf("charged usage %v, want %v", got, want)
	}
	drift(t, e, "a", nsquota.Usage{})
	if err := e.rec.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := used(t, e, "a"); !got.Equal(want) {
		t.Fatalf("recomputed usage %v, want %v", got, want)
	}
}

// Run makes a pass at once and then one per interval of its clock.
func TestRunPeriodic(t *testing.T) {
	t.Parallel()
	clk := testclock.NewFakeClock(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	e := newEnv(t, storetest.Client(t), Options{Interval: time.Minute, Clock: clk})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	mustCreate(t, e.plainVMs, vm("a", "old", 1))
	go func() { defer close(done); e.rec.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitUsed := func(want nsquota.Usage) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			obj, err := e.nss.Get(ctx, "", "a")
			if errors.Is(err, store.ErrNotFound) {
				return false, nil
			}
			return err == nil && nsquota.FromAPI(obj.GetStatus().GetUsed()).Equal(want), err
		})
		if err != nil {
			t.Fatalf("usage of a never became %v: %v", want, err)
		}
	}
	want := nsquota.Usage{VCPUs: 1, Memory: 1 << 30, VMs: 1}
	waitUsed(want)
	// Wait for the pass to end (its timer is set), then drift and tick.
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return clk.HasWaiters(), nil
	}); err != nil {
		t.Fatal(err)
	}
	drift(t, e, "a", nsquota.Usage{VMs: 7})
	clk.Step(time.Minute)
	waitUsed(want)
}
