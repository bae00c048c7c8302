package adoption

import (
	"context"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/controllertest"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
)

type fixture struct {
	c         *Controller
	adoptions controllertest.Cache[*apiv1.VirtualMachineAdoption]
	vms       controllertest.Cache[*apiv1.VirtualMachine]
}

func newFixture(t *testing.T, policy *validation.HostPolicy, a *apiv1.VirtualMachineAdoption, vms ...*apiv1.VirtualMachine) *fixture {
	t.Helper()
	db := memstore.NewDB(func() time.Time { return time.Unix(1_800_000_000, 0) })
	f := &fixture{
		adoptions: controllertest.NewCache(db, store.Adoptions, a),
		vms:       controllertest.NewCache(db, store.VirtualMachines, vms...),
	}
	f.c = New(Options{Validation: validation.Options{ImageDir: "/var/lib/virtplane/images", HostPolicy: policy}},
		f.adoptions.Informer, f.vms.Informer, f.adoptions.Store, f.vms.Store, controllertest.Discard())
	return f
}

func (f *fixture) settle(t *testing.T) *apiv1.VirtualMachineAdoption {
	t.Helper()
	for range 10 {
		f.adoptions.Sync(t)
		f.vms.Sync(t)
		f.adoptions.Store.ResetWrites()
		f.vms.Store.ResetWrites()
		if _, err := f.c.Reconcile(context.Background(), "default/web"); err != nil {
			t.Fatalf("reconcile: %v", err)
		}
		if len(f.adoptions.Store.Writes())+len(f.vms.Store.Writes()) == 0 {
			return f.adoptions.Get(t, "default", "web")
		}
	}
	t.Fatal("the adoption did not settle")
	return nil
}

// mapped is an adoption its node mapped: one local volume on a bridge.
func mapped(dryRun bool, strategy string) *apiv1.VirtualMachineAdoption {
	return &apiv1.VirtualMachineAdoption{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: "6f1c2a3e-0000-4000-8000-00000000a001",
			Labels: map[string]string{apiv1.LabelNodeName: "node-a"}},
		Spec: &apiv1.VirtualMachineAdoptionSpec{NodeName: "node-a", DomainName: "legacy-web", DryRun: dryRun, RunStrategy: strategy},
		Status: &apiv1.VirtualMachineAdoptionStatus{Phase: apiv1.AdoptionMapped, DomainUuid: "6f1c2a3e-0000-4000-8000-00000000d001",
			Spec: &apiv1.VirtualMachineInstanceSpec{
				Domain: &apiv1.DomainSpec{
					Memory: &apiv1.Memory{Guest: "160Mi"},
					Devices: &apiv1.Devices{
						Disks:      []*apiv1.Disk{{Name: "vda", Disk: &apiv1.DiskTarget{Bus: "virtio"}}},
						Interfaces: []*apiv1.Interface{{Name: "nic0", Model: "virtio", MacAddress: "52:54:00:12:34:56"}},
					},
				},
				Volumes:  []*apiv1.Volume{{Name: "vda", Persistent: &apiv1.PersistentVolume{Size: "67108864"}}},
				Networks: []*apiv1.Network{{Name: "nic0", Bridge: &apiv1.BridgeNetwork{Bridge: "br0"}}},
			}},
	}
}

// The mapped VM is made as the API would take it, pinned to the domain's
// node, marked with the adoption, and keeps the domain's MAC.
func TestMappedAdoptionMakesTheVM(t *testing.T) {
	f := newFixture(t, &validation.HostPolicy{Bridges: []string{"br0"}}, mapped(false, apiv1.RunStrategyAlways))
	a := f.settle(t)
	if a.GetStatus().GetPhase() != apiv1.AdoptionAdopting {
		t.Fatalf("phase %s (%s, %v)", a.GetStatus().GetPhase(), a.GetStatus().GetMessage(), a.GetStatus().GetRefusals())
	}
	vm := f.vms.Get(t, "default", "web")
	if a.GetStatus().GetVmUid() != vm.GetMetadata().GetUid() {
		t.Errorf("vm_uid %q, VM %q", a.GetStatus().GetVmUid(), vm.GetMetadata().GetUid())
	}
	if got := vm.GetStatus().GetNodeName(); got != "node-a" {
		t.Errorf("the VM's node is %q, want node-a (its volumes are there)", got)
	}
	if got := apiv1.AdoptionOf(vm.GetSpec().GetTemplate().GetMetadata()); got != a.GetMetadata().GetUid() {
		t.Errorf("template annotation %q", got)
	}
	if got := vm.GetSpec().GetTemplate().GetSpec().GetDomain().GetDevices().GetInterfaces()[0].GetMacAddress(); got != "52:54:00:12:34:56" {
		t.Errorf("MAC %q: the domain's must be kept", got)
	}
	if errs := validation.ValidateVirtualMachine(vm, validation.Options{}); len(errs) > 0 {
		t.Errorf("the VM made is invalid: %v", errs)
	}
	// The VM's deletion before the take-over fails the adoption.
	if _, _, err := f.vms.Store.Delete(context.Background(), "default", "web", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if a := f.settle(t); a.GetStatus().GetPhase() != apiv1.AdoptionFailed || !strings.Contains(a.GetStatus().GetMessage(), "deleted") {
		t.Errorf("after the VM's deletion: %s %q", a.GetStatus().GetPhase(), a.GetStatus().GetMessage())
	}
}

// The server's host policy is the controller's to apply: a bridge it does
// not allow refuses the adoption by field, and no VM is made.
func TestServerPolicyRefuses(t *testing.T) {
	f := newFixture(t, &validation.HostPolicy{}, mapped(false, apiv1.RunStrategyAlways))
	a := f.settle(t)
	if a.GetStatus().GetPhase() != apiv1.AdoptionRefused {
		t.Fatalf("phase %s", a.GetStatus().GetPhase())
	}
	r := a.GetStatus().GetRefusals()
	if len(r) == 0 || !strings.Contains(r[0].GetElement(), "networks[0].bridge") {
		t.Errorf("refusals %v", r)
	}
	if _, err := f.vms.Store.Get(context.Background(), "default", "web"); err == nil {
		t.Error("a VM was made for a refused adoption")
	}
}

// A dry run stays Mapped; a VM of the name that is not the adoption's
// fails it; Manual asks for the start that takes the domain over.
func TestDryRunTakenNameAndManual(t *testing.T) {
	policy := &validation.HostPolicy{Bridges: []string{"br0"}}
	f := newFixture(t, policy, mapped(true, apiv1.RunStrategyAlways))
	if a := f.settle(t); a.GetStatus().GetPhase() != apiv1.AdoptionMapped {
		t.Errorf("dry run: phase %s", a.GetStatus().GetPhase())
	}
	if _, err := f.vms.Store.Get(context.Background(), "default", "web"); err == nil {
		t.Error("a dry run made a VM")
	}

	other := &apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: "6f1c2a3e-0000-4000-8000-0000000000ff"},
		Spec: &apiv1.VirtualMachineSpec{Template: &apiv1.VirtualMachineInstanceTemplateSpec{}}}
	f = newFixture(t, policy, mapped(false, apiv1.RunStrategyAlways), other)
	if a := f.settle(t); a.GetStatus().GetPhase() != apiv1.AdoptionFailed || !strings.Contains(a.GetStatus().GetMessage(), "exists already") {
		t.Errorf("taken name: %s %q", a.GetStatus().GetPhase(), a.GetStatus().GetMessage())
	}

	f = newFixture(t, policy, mapped(false, apiv1.RunStrategyManual))
	if a := f.settle(t); a.GetStatus().GetPhase() != apiv1.AdoptionAdopting {
		t.Fatalf("manual: phase %s", a.GetStatus().GetPhase())
	}
	vm := f.vms.Get(t, "default", "web")
	if reqs := vm.GetStatus().GetStateChangeRequests(); len(reqs) != 1 || reqs[0].GetAction() != apiv1.StateChangeStart {
		t.Errorf("a Manual VM's requests %v, want one Start", reqs)
	}
}
