package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func list(items ...string) *apiv1.StringList { return &apiv1.StringList{Items: items} }

func TestCheckNamespaceAllowed(t *testing.T) {
	spec := &apiv1.VirtualMachineInstanceSpec{
		Networks: []*apiv1.Network{
			{Name: "lan", Bridge: &apiv1.BridgeNetwork{Bridge: "br9"}},
			{Name: "nat", Network: &apiv1.LibvirtNetwork{Name: "default"}},
			{Name: "user", User: &apiv1.UserNetwork{PortForwards: []*apiv1.PortForward{{HostPort: 8080, GuestPort: 80}, {HostPort: 20001, GuestPort: 22}}}},
		},
		Volumes: []*apiv1.Volume{
			{Name: "a", Persistent: &apiv1.PersistentVolume{Size: "1Gi", StorageClass: "local"}},
			{Name: "b", Persistent: &apiv1.PersistentVolume{Size: "1Gi", StorageClass: "ceph"}},
		},
	}
	path := field.NewPath("spec")
	// Absent lists narrow nothing.
	if errs := CheckNamespaceAllowed("a", &apiv1.NamespaceAllowed{}, spec, path); len(errs) != 0 {
		t.Fatalf("no lists: %v", errs)
	}
	if errs := CheckNamespaceAllowed("a", nil, spec, path); len(errs) != 0 {
		t.Fatalf("nil: %v", errs)
	}
	// Present lists narrow; "" allows the node's disk whether spelled "" or "local".
	errs := CheckNamespaceAllowed("a", &apiv1.NamespaceAllowed{
		Bridges: list("br0"), Networks: list(), StorageClasses: list(""), PortForwardRanges: list("20000-20999"),
	}, spec, path)
	want := []string{
		`spec.networks[0].bridge.bridge: Forbidden: bridge "br9" is not allowed in namespace a (allowed: br0)`,
		`spec.networks[1].network.name: Forbidden: libvirt network "default" is not allowed in namespace a (allowed: none)`,
		`spec.networks[2].user.port_forwards[0].host_port: Forbidden: host port "8080" is not allowed in namespace a (allowed: 20000-20999)`,
		`spec.volumes[1].persistent.storage_class: Forbidden: storage class "ceph" is not allowed in namespace a (allowed: "" (the node's disk))`,
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d refusals, want %d: %v", len(errs), len(want), errs)
	}
	for i, w := range want {
		if errs[i].Error() != w {
			t.Errorf("refusal %d:\n%s\nwant\n%s", i, errs[i].Error(), w)
		}
	}
	// Everything allowed passes.
	if errs := CheckNamespaceAllowed("a", &apiv1.NamespaceAllowed{
		Bridges: list("br9"), Networks: list("default"), StorageClasses: list("local", "ceph"), PortForwardRanges: list("8080", "20000-20999"),
	}, spec, path); len(errs) != 0 {
		t.Fatalf("all allowed: %v", errs)
	}
}

func TestValidateNamespace(t *testing.T) {
	neg, ok := int64(-1), int64(3)
	good := &apiv1.Namespace{Metadata: &apiv1.ObjectMeta{Name: "team-a"}, Spec: &apiv1.NamespaceSpec{
		Quota:   &apiv1.NamespaceQuota{Vcpus: &ok, Memory: strPtr("64Gi"), PersistentStorage: map[string]string{"": "1Ti", "ceph": "0"}},
		Allowed: &apiv1.NamespaceAllowed{PortForwardRanges: list("8080", "20000-20999"), StorageClasses: list("", "local", "ceph")},
	}}
	if errs := ValidateNamespace(good); len(errs) != 0 {
		t.Fatalf("valid namespace: %v", errs)
	}
	bad := &apiv1.Namespace{Metadata: &apiv1.ObjectMeta{Name: "a.b", Namespace: "x"}, Spec: &apiv1.NamespaceSpec{
		Quota:   &apiv1.NamespaceQuota{Vms: &neg, Memory: strPtr("-1Gi"), PersistentStorage: map[string]string{"ceph": "x"}},
		Allowed: &apiv1.NamespaceAllowed{PortForwardRanges: list("0"), Networks: list("a/b")},
	}}
	got := ValidateNamespace(bad).ToAggregate().Error()
	for _, f := range []string{"metadata.name", "metadata.namespace", "spec.quota.vms", "spec.quota.memory", "spec.quota.persistent_storage[ceph]",
		"spec.allowed.port_forward_ranges.items[0]", "spec.allowed.networks.items[0]"} {
		if !strings.Contains(got, f) {
			t.Errorf("%q does not name %s", got, f)
		}
	}
}

func strPtr(s string) *string { return &s }
