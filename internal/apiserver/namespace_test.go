package apiserver

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nsquota"
)

func ptr[T any](v T) *T { return &v }

func haltedVMIn(ns, name string) *apiv1.VirtualMachine {
	vm := vmIn(ns, name)
	vm.Spec.RunStrategy = apiv1.RunStrategyHalted
	return vm
}

// THE RACE, through the API: 50 creates for one free slot, of the VM
// count or of vCPUs.
func TestNamespaceQuotaRaceThroughAPI(t *testing.T) {
	for _, tc := range []struct {
		name  string
		quota *apiv1.NamespaceQuota
		bound string
	}{
		{"vms", &apiv1.NamespaceQuota{Vms: ptr[int64](5), Vcpus: ptr[int64](100)}, "vms: requested 1, used 5, limited 5"},
		{"vcpus", &apiv1.NamespaceQuota{Vcpus: ptr[int64](5)}, "vcpus: requested 1, used 5, limited 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			ctx := t.Context()
			nss := apiv1.NewNamespacesClient(f.conn)
			if _, err := nss.Create(ctx, &apiv1.CreateNamespaceRequest{Namespace: &apiv1.Namespace{
				Metadata: &apiv1.ObjectMeta{Name: "a"}, Spec: &apiv1.NamespaceSpec{Quota: tc.quota},
			}}); err != nil {
				t.Fatal(err)
			}
			for i := range 4 {
				if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: haltedVMIn("a", fmt.Sprintf("seed%d", i))}); err != nil {
					t.Fatal(err)
				}
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
					_, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: haltedVMIn("a", fmt.Sprintf("racer%d", i))})
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
			if ok != 1 {
				t.Errorf("%d creates passed, want 1", ok)
			}
			for _, err := range refusals {
				if code(err) != codes.ResourceExhausted || !strings.Contains(status.Convert(err).Message(), "namespace a: exceeded quota: "+tc.bound) {
					t.Fatalf("refusal %v: want ResourceExhausted naming %q", err, tc.bound)
				}
			}
			list, err := f.vms.List(ctx, &apiv1.ListVirtualMachinesRequest{Options: &apiv1.ListOptions{Namespace: "a"}})
			if err != nil {
				t.Fatal(err)
			}
			ns, err := nss.Get(ctx, &apiv1.GetNamespaceRequest{Name: "a"})
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Items) != 5 || ns.Status.Used.Vms != 5 || ns.Status.Used.Vcpus != 5 || ns.Status.Used.Memory != "5Gi" {
				t.Fatalf("stored %d VMs, used %v; want 5 VMs and their usage", len(list.Items), ns.Status.Used)
			}
		})
	}
}

func TestNamespaceAPI(t *testing.T) {
	f := newFixture(t)
	ctx := t.Context()
	nss := apiv1.NewNamespacesClient(f.conn)

	// Made on first use, with no quota.
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: haltedVMIn("team", "web")}); err != nil {
		t.Fatal(err)
	}
	ns, err := nss.Get(ctx, &apiv1.GetNamespaceRequest{Name: "team"})
	if err != nil {
		t.Fatal(err)
	}
	if ns.GetSpec().GetQuota() != nil || ns.Status.Used.Vms != 1 {
		t.Fatalf("namespace made on first use: %v", ns)
	}

	// Validation names the fields.
	bad := &apiv1.Namespace{Metadata: &apiv1.ObjectMeta{Name: "Bad_Name"}, Spec: &apiv1.NamespaceSpec{
		Quota: &apiv1.NamespaceQuota{Vcpus: ptr[int64](-1), Memory: ptr("lots"), PersistentStorage: map[string]string{"ceph": "-1Gi", "Not A Class": "1Gi"}},
		Allowed: &apiv1.NamespaceAllowed{PortForwardRanges: &apiv1.StringList{Items: []string{"9000-8000"}},
			Bridges: &apiv1.StringList{Items: []string{"a/b"}}},
	}}
	_, err = nss.Create(ctx, &apiv1.CreateNamespaceRequest{Namespace: bad})
	if code(err) != codes.InvalidArgument {
		t.Fatalf("invalid namespace: %v", err)
	}
	for _, want := range []string{"metadata.name", "spec.quota.vcpus", "spec.quota.memory", `spec.quota.persistent_storage[ceph]`,
		`spec.quota.persistent_storage[Not A Class]`, "spec.allowed.port_forward_ranges.items[0]", "spec.allowed.bridges.items[0]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not name %s", err, want)
		}
	}

	// Update takes the spec; the status stays the server's; a usage change
	// since the read does not make it stale.
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: haltedVMIn("team", "db")}); err != nil {
		t.Fatal(err)
	}
	ns.Spec = &apiv1.NamespaceSpec{Quota: &apiv1.NamespaceQuota{Vms: ptr[int64](2), Memory: ptr("8Gi")}}
	ns.Status = &apiv1.NamespaceStatus{Used: &apiv1.NamespaceUsage{Vms: 0}}
	up, err := nss.Update(ctx, &apiv1.UpdateNamespaceRequest{Namespace: ns})
	if err != nil {
		t.Fatalf("update after a usage change: %v", err)
	}
	if up.Status.Used.Vms != 2 || up.Spec.Quota.GetVms() != 2 || up.Metadata.Generation != 2 {
		t.Fatalf("updated namespace %v", up)
	}
	// A stale spec is a conflict.
	ns.Metadata.Generation = 1
	ns.Metadata.ResourceVersion = 1
	if _, err := nss.Update(ctx, &apiv1.UpdateNamespaceRequest{Namespace: ns}); code(err) != codes.Aborted {
		t.Fatalf("stale update: %v, want Aborted", err)
	}
	_, err = f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: haltedVMIn("team", "third")})
	if code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "namespace team: exceeded quota: vms: requested 1, used 2, limited 2") {
		t.Fatalf("third VM: %v", err)
	}

	// List and Delete, refused while not empty.
	list, err := nss.List(ctx, &apiv1.ListNamespacesRequest{})
	if err != nil || len(list.Items) != 1 || list.Items[0].Metadata.Name != "team" {
		t.Fatalf("list: %v %v", list, err)
	}
	_, err = nss.Delete(ctx, &apiv1.DeleteNamespaceRequest{Name: "team"})
	if code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "vm team/db") {
		t.Fatalf("delete of a namespace with VMs: %v", err)
	}
	for _, name := range []string{"web", "db"} {
		if _, err := f.vms.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: &apiv1.ObjectKey{Namespace: "team", Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	// The VMs' finalizers go with the controllers, absent here: remove them.
	for _, name := range []string{"web", "db"} {
		_, err := f.st.VMs.GuaranteedUpdate(ctx, "team", name, func(vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
			vm.Metadata.Finalizers = nil
			return vm, nil
		})
		if err != nil && !strings.Contains(err.Error(), "not found") {
			t.Fatal(err)
		}
	}
	got, err := nss.Get(ctx, &apiv1.GetNamespaceRequest{Name: "team"})
	if err != nil {
		t.Fatal(err)
	}
	if u := nsquota.FromAPI(got.Status.Used); !u.IsZero() {
		t.Fatalf("empty namespace uses %v", u)
	}
	if _, err := nss.Delete(ctx, &apiv1.DeleteNamespaceRequest{Name: "team"}); err != nil {
		t.Fatalf("delete of an empty namespace: %v", err)
	}
	if _, err := f.st.Namespaces.Get(ctx, "", "team"); !strings.Contains(fmt.Sprint(err), "not found") {
		t.Fatalf("after delete: %v", err)
	}
}
