package store_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nsquota"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/storetest"
)

func accountingOptions(t *testing.T) store.Options {
	o := testOptions(t)
	o.Accounting = true
	return o
}

// sizedVM is a halted VM of vcpus vCPUs, mem guest memory and the given
// persistent volumes ("class=size").
func sizedVM(ns, name string, vcpus int32, mem string, vols ...string) *apiv1.VirtualMachine {
	vm := storetest.NewVM(ns, name, nil)
	spec := &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{
		Cpu: &apiv1.CPU{Sockets: 1, Cores: vcpus, Threads: 1}, Memory: &apiv1.Memory{Guest: mem}}}
	for i, v := range vols {
		class, size, _ := strings.Cut(v, "=")
		spec.Volumes = append(spec.Volumes, &apiv1.Volume{Name: fmt.Sprintf("v%d", i),
			Persistent: &apiv1.PersistentVolume{StorageClass: class, Size: size}})
	}
	vm.Spec.Template = &apiv1.VirtualMachineInstanceTemplateSpec{Spec: spec}
	return vm
}

func usedOf(t *testing.T, ns store.Store[*apiv1.Namespace], name string) nsquota.Usage {
	t.Helper()
	obj, err := ns.Get(t.Context(), "", name)
	if err != nil {
		t.Fatal(err)
	}
	return nsquota.FromAPI(obj.GetStatus().GetUsed())
}

func wantUsed(t *testing.T, ns store.Store[*apiv1.Namespace], name string, want nsquota.Usage) {
	t.Helper()
	if got := usedOf(t, ns, name); !got.Equal(want) {
		t.Fatalf("namespace %s used %v, want %v", name, got, want)
	}
}

func setQuota(t *testing.T, ns store.Store[*apiv1.Namespace], name string, q *apiv1.NamespaceQuota) {
	t.Helper()
	if _, err := ns.GuaranteedUpdate(t.Context(), "", name, func(n *apiv1.Namespace) (*apiv1.Namespace, error) {
		n.Spec = &apiv1.NamespaceSpec{Quota: q}
		return n, nil
	}); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

// THE RACE: 50 creates race for a namespace's last slots, through one
// store each as separate writers would; exactly the free slots are
// taken, usage never passes the quota and every refusal names it.
func TestAccountingQuotaRace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		quota *apiv1.NamespaceQuota
		vcpus int32
		free  int
		bound string
	}{
		{"vms", &apiv1.NamespaceQuota{Vms: ptr[int64](5)}, 1, 1, "vms: requested 1, used 5, limited 5"},
		{"vcpus", &apiv1.NamespaceQuota{Vcpus: ptr[int64](16)}, 2, 1, "vcpus: requested 2, used 16, limited 16"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := storetest.Client(t)
			opts := accountingOptions(t)
			vms := store.New(c, store.VirtualMachines, opts)
			nss := store.New(c, store.Namespaces, opts)
			ctx := t.Context()
			// Used: one below the bound (vms 4 of 5; vcpus 14 of 16).
			if _, err := vms.Create(ctx, sizedVM("a", "seed", tc.vcpus, "1Gi")); err != nil {
				t.Fatal(err)
			}
			setQuota(t, nss, "a", tc.quota)
			seeded := 1
			for usedOf(t, nss, "a").VMs < 4 && tc.name == "vms" || usedOf(t, nss, "a").VCPUs < 14 && tc.name == "vcpus" {
				if _, err := vms.Create(ctx, sizedVM("a", fmt.Sprintf("seed%d", seeded), tc.vcpus, "1Gi")); err != nil {
					t.Fatal(err)
				}
				seeded++
			}
			var (
				wg       sync.WaitGroup
				mu       sync.Mutex
				ok       int
				refusals []error
			)
			for i := range 50 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s := store.New(c, store.VirtualMachines, opts)
					_, err := s.Create(ctx, sizedVM("a", fmt.Sprintf("racer%d", i), tc.vcpus, "1Gi"))
					mu.Lock()
					defer mu.Unlock()
					if err == nil {
						ok++
					} else {
						refusals = append(refusals, err)
					}
				}()
			}
			wg.Wait()
			if ok != tc.free {
				t.Errorf("%d creates passed, want %d", ok, tc.free)
			}
			for _, err := range refusals {
				var qe *store.QuotaExceededError
				if !errors.As(err, &qe) || !errors.Is(err, store.ErrQuotaExceeded) || qe.Namespace != "a" {
					t.Fatalf("refusal %v: want a QuotaExceededError of namespace a", err)
				}
				if !strings.Contains(err.Error(), "namespace a: exceeded quota: "+tc.bound) {
					t.Errorf("refusal %q does not name the bound %q", err, tc.bound)
				}
			}
			stored, _, err := vms.List(ctx, store.ListOptions{Namespace: "a"})
			if err != nil {
				t.Fatal(err)
			}
			var want nsquota.Usage
			for _, vm := range stored {
				want = want.Add(nsquota.OfVM(vm))
			}
			wantUsed(t, nss, "a", want)
			if tc.name == "vms" && want.VMs != 5 || tc.name == "vcpus" && want.VCPUs != 16 {
				t.Errorf("stored VMs ask %v, want the quota exactly", want)
			}
		})
	}
}

// Create charges, an update charges its difference, delete releases, a
// deletion held by a finalizer releases when the last finalizer goes.
func TestAccountingLifecycle(t *testing.T) {
	t.Parallel()
	c := storetest.Client(t)
	opts := accountingOptions(t)
	vms := store.New(c, store.VirtualMachines, opts)
	nss := store.New(c, store.Namespaces, opts)
	ctx := t.Context()

	a := sizedVM("a", "a", 2, "1Gi", "=10Gi", "ceph=5Gi")
	if _, err := vms.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	ns, err := nss.Get(ctx, "", "a")
	if err != nil {
		t.Fatalf("namespace made on first use: %v", err)
	}
	if ns.GetSpec().GetQuota() != nil || ns.GetMetadata().GetUid() == "" {
		t.Fatalf("made namespace %v: want no quota and a uid", ns)
	}
	wantUsed(t, nss, "a", nsquota.Usage{VCPUs: 2, Memory: 1 << 30, VMs: 1, Storage: map[string]int64{"": 10 << 30, "ceph": 5 << 30}})

	// Update delta: a volume added and more memory (AddVolume, a resize).
	if _, err := vms.GuaranteedUpdate(ctx, "a", "a", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		vm.Spec.Template.Spec.Domain.Memory.Guest = "2Gi"
		vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes,
			&apiv1.Volume{Name: "hot", Persistent: &apiv1.PersistentVolume{StorageClass: "ceph", Size: "1Gi"}})
		return vm, nil
	}); err != nil {
		t.Fatal(err)
	}
	wantUsed(t, nss, "a", nsquota.Usage{VCPUs: 2, Memory: 2 << 30, VMs: 1, Storage: map[string]int64{"": 10 << 30, "ceph": 6 << 30}})

	// Update (not Guaranteed) reads what it replaces itself.
	cur, err := vms.Get(ctx, "a", "a")
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.Template.Spec.Domain.Cpu.Cores = 4
	if _, err := vms.Update(ctx, cur); err != nil {
		t.Fatal(err)
	}
	wantUsed(t, nss, "a", nsquota.Usage{VCPUs: 4, Memory: 2 << 30, VMs: 1, Storage: map[string]int64{"": 10 << 30, "ceph": 6 << 30}})
	// A stale Update is a conflict, and charges nothing.
	if _, err := vms.Update(ctx, cur); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale update: %v, want ErrConflict", err)
	}

	// Plain delete releases everything.
	if _, _, err := vms.Delete(ctx, "a", "a", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wantUsed(t, nss, "a", nsquota.Usage{})

	// With a finalizer: still charged while deleting, released when the
	// last finalizer is removed.
	b := sizedVM("a", "b", 1, "1Gi")
	b.Metadata.Finalizers = []string{"virtplane.io/test"}
	if _, err := vms.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	if _, deleted, err := vms.Delete(ctx, "a", "b", store.DeleteOptions{}); err != nil || deleted {
		t.Fatalf("delete with a finalizer: deleted %v, %v", deleted, err)
	}
	wantUsed(t, nss, "a", nsquota.Usage{VCPUs: 1, Memory: 1 << 30, VMs: 1})
	if _, err := vms.GuaranteedUpdate(ctx, "a", "b", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		vm.Metadata.Finalizers = nil
		return vm, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := vms.Get(ctx, "a", "b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after its last finalizer: %v, want ErrNotFound", err)
	}
	wantUsed(t, nss, "a", nsquota.Usage{})

	// A decrease passes under a quota lowered below usage; an increase not.
	if _, err := vms.Create(ctx, sizedVM("a", "c", 4, "1Gi")); err != nil {
		t.Fatal(err)
	}
	setQuota(t, nss, "a", &apiv1.NamespaceQuota{Vcpus: ptr[int64](2)})
	if _, err := vms.GuaranteedUpdate(ctx, "a", "c", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		vm.Spec.Template.Spec.Domain.Cpu.Cores = 3
		return vm, nil
	}); err != nil {
		t.Fatalf("decrease under a lowered quota: %v", err)
	}
	_, err = vms.GuaranteedUpdate(ctx, "a", "c", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		vm.Spec.Template.Spec.Domain.Cpu.Cores = 5
		return vm, nil
	})
	if !errors.Is(err, store.ErrQuotaExceeded) || !strings.Contains(err.Error(), "vcpus: requested 2, used 3, limited 2") {
		t.Fatalf("increase under a lowered quota: %v", err)
	}
	// A write that changes no usage passes whatever the quota.
	if _, err := vms.GuaranteedUpdate(ctx, "a", "c", func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		vm.Metadata.Labels = map[string]string{"x": "y"}
		return vm, nil
	}); err != nil {
		t.Fatalf("a label under a lowered quota: %v", err)
	}
}

// A replica set's instances count (they have no VM); a VM's do not.
func TestAccountingInstances(t *testing.T) {
	t.Parallel()
	c := storetest.Client(t)
	opts := accountingOptions(t)
	vmis := store.New(c, store.VirtualMachineInstances, opts)
	nss := store.New(c, store.Namespaces, opts)
	ctx := t.Context()
	spec := sizedVM("a", "x", 2, "512Mi").Spec.Template.Spec
	rs := &apiv1.VirtualMachineInstance{Metadata: &apiv1.ObjectMeta{Namespace: "a", Name: "rs-1",
		OwnerReferences: []*apiv1.OwnerReference{{Kind: apiv1.KindReplicaSet, Uid: "rs", Controller: true}}}, Spec: spec}
	owned := &apiv1.VirtualMachineInstance{Metadata: &apiv1.ObjectMeta{Namespace: "a", Name: "vm",
		OwnerReferences: []*apiv1.OwnerReference{{Kind: apiv1.KindVirtualMachine, Uid: "vm", Controller: true}}}, Spec: spec}
	for _, vmi := range []*apiv1.VirtualMachineInstance{rs, owned} {
		if _, err := vmis.Create(ctx, vmi); err != nil {
			t.Fatal(err)
		}
	}
	wantUsed(t, nss, "a", nsquota.Usage{VCPUs: 2, Memory: 512 << 20, VMs: 1})
	setQuota(t, nss, "a", &apiv1.NamespaceQuota{Vms: ptr[int64](1)})
	rs2 := &apiv1.VirtualMachineInstance{Metadata: &apiv1.ObjectMeta{Namespace: "a", Name: "rs-2",
		OwnerReferences: rs.Metadata.OwnerReferences}, Spec: spec}
	if _, err := vmis.Create(ctx, rs2); !errors.Is(err, store.ErrQuotaExceeded) {
		t.Fatalf("second replica over vms 1: %v", err)
	}
	// Status updates (the node agent's) change no usage and pass.
	if _, err := vmis.GuaranteedUpdate(ctx, "a", "rs-1", func(vmi *apiv1.VirtualMachineInstance) (*apiv1.VirtualMachineInstance, error) {
		vmi.Status = &apiv1.VirtualMachineInstanceStatus{Phase: apiv1.PhaseRunning}
		return vmi, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := vmis.Delete(ctx, "a", "rs-1", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wantUsed(t, nss, "a", nsquota.Usage{})
}

// Images count against the namespace of their label, and move with it.
func TestAccountingImages(t *testing.T) {
	t.Parallel()
	c := storetest.Client(t)
	opts := accountingOptions(t)
	imgs := store.New(c, store.Images, opts)
	nss := store.New(c, store.Namespaces, opts)
	ctx := t.Context()
	img := func(name, ns string) *apiv1.Image {
		md := &apiv1.ObjectMeta{Name: name}
		if ns != "" {
			md.Labels = map[string]string{apiv1.LabelOwnerNamespace: ns}
		}
		return &apiv1.Image{Metadata: md}
	}
	if _, err := imgs.Create(ctx, img("cluster", "")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := nss.List(ctx, store.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := imgs.Create(ctx, img("i1", "a")); err != nil {
		t.Fatal(err)
	}
	wantUsed(t, nss, "a", nsquota.Usage{Images: 1})
	setQuota(t, nss, "a", &apiv1.NamespaceQuota{Images: ptr[int64](1)})
	if _, err := imgs.Create(ctx, img("i2", "a")); !errors.Is(err, store.ErrQuotaExceeded) ||
		!strings.Contains(err.Error(), "images: requested 1, used 1, limited 1") {
		t.Fatalf("second image over images 1: %v", err)
	}
	// Moving the label moves the charge.
	if _, err := imgs.GuaranteedUpdate(ctx, "", "i1", func(i *apiv1.Image) (*apiv1.Image, error) {
		i.Metadata.Labels[apiv1.LabelOwnerNamespace] = "b"
		return i, nil
	}); err != nil {
		t.Fatal(err)
	}
	wantUsed(t, nss, "a", nsquota.Usage{})
	wantUsed(t, nss, "b", nsquota.Usage{Images: 1})
	if _, _, err := imgs.Delete(ctx, "", "i1", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wantUsed(t, nss, "b", nsquota.Usage{})
}

// Any namespaced object's create makes its namespace; writes of other
// kinds never touch namespaces.
func TestAccountingNamespaceOnFirstUse(t *testing.T) {
	t.Parallel()
	c := storetest.Client(t)
	opts := accountingOptions(t)
	snaps := store.New(c, store.Snapshots, opts)
	nss := store.New(c, store.Namespaces, opts)
	ctx := t.Context()
	if _, err := snaps.Create(ctx, &apiv1.VirtualMachineSnapshot{Metadata: &apiv1.ObjectMeta{Namespace: "fresh", Name: "s"}}); err != nil {
		t.Fatal(err)
	}
	ns, err := nss.Get(ctx, "", "fresh")
	if err != nil {
		t.Fatal(err)
	}
	if !nsquota.FromAPI(ns.GetStatus().GetUsed()).IsZero() {
		t.Fatalf("namespace of a snapshot uses %v", ns.GetStatus().GetUsed())
	}
	// A second create leaves the namespace as it is.
	if _, err := snaps.Create(ctx, &apiv1.VirtualMachineSnapshot{Metadata: &apiv1.ObjectMeta{Namespace: "fresh", Name: "t"}}); err != nil {
		t.Fatal(err)
	}
	again, err := nss.Get(ctx, "", "fresh")
	if err != nil {
		t.Fatal(err)
	}
	if again.Metadata.ResourceVersion != ns.Metadata.ResourceVersion {
		t.Fatalf("namespace rewritten by a create that charges nothing")
	}
	// Without accounting, nothing is made.
	plain := store.New(c, store.Snapshots, testOptions(t))
	if _, err := plain.Create(ctx, &apiv1.VirtualMachineSnapshot{Metadata: &apiv1.ObjectMeta{Namespace: "other", Name: "s"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := nss.Get(ctx, "", "other"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("namespace without accounting: %v", err)
	}
}

// A fenced store's charged write still fails with ErrNotLeader, and
// charges nothing, once its term has ended.
func TestAccountingFenced(t *testing.T) {
	t.Parallel()
	c := storetest.Client(t)
	opts := accountingOptions(t)
	key := opts.Prefix + "/leader/x"
	resp, err := c.Put(t.Context(), key, "me")
	if err != nil {
		t.Fatal(err)
	}
	fenced := opts
	fenced.LeaderTerm = &store.LeaderTerm{Key: key, Revision: resp.Header.Revision}
	vms := store.New(c, store.VirtualMachines, fenced)
	nss := store.New(c, store.Namespaces, opts)
	if _, err := vms.Create(t.Context(), sizedVM("a", "a", 1, "1Gi")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Delete(t.Context(), key, clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	if _, err := vms.Create(t.Context(), sizedVM("a", "b", 1, "1Gi")); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("create after the term: %v, want ErrNotLeader", err)
	}
	wantUsed(t, nss, "a", nsquota.Usage{VCPUs: 1, Memory: 1 << 30, VMs: 1})
}

// A Namespace is deleted only empty, checked in the deletion's own
// transaction; an object created after it makes it again.
func TestAccountingNamespaceDeleteGuard(t *testing.T) {
	t.Parallel()
	c := storetest.Client(t)
	opts := accountingOptions(t)
	nss := store.New(c, store.Namespaces, opts)
	snaps := store.New(c, store.Snapshots, opts)
	// A store without accounting, as a write past it: the guard still sees it.
	plain := opts
	plain.Accounting = false
	plainSnaps := store.New(c, store.Snapshots, plain)
	ctx := t.Context()
	if _, err := nss.Create(ctx, &apiv1.Namespace{Metadata: &apiv1.ObjectMeta{Name: "a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := plainSnaps.Create(ctx, &apiv1.VirtualMachineSnapshot{Metadata: &apiv1.ObjectMeta{Namespace: "a", Name: "s"}}); err != nil {
		t.Fatal(err)
	}
	// A namespace named like a prefix of a's is not a's.
	if _, err := plainSnaps.Create(ctx, &apiv1.VirtualMachineSnapshot{Metadata: &apiv1.ObjectMeta{Namespace: "ab", Name: "s"}}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := nss.Delete(ctx, "", "a", store.DeleteOptions{}); !errors.Is(err, store.ErrNotEmpty) {
		t.Fatalf("delete of a namespace with a snapshot: %v, want ErrNotEmpty", err)
	}
	if _, _, err := plainSnaps.Delete(ctx, "a", "s", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, deleted, err := nss.Delete(ctx, "", "a", store.DeleteOptions{}); err != nil || !deleted {
		t.Fatalf("delete of an empty namespace: %v %v", deleted, err)
	}
	if _, err := snaps.Create(ctx, &apiv1.VirtualMachineSnapshot{Metadata: &apiv1.ObjectMeta{Namespace: "a", Name: "t"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := nss.Get(ctx, "", "a"); err != nil {
		t.Fatalf("namespace after a create following its deletion: %v", err)
	}
}
