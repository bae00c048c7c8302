package apiserver

import (
	"net/netip"
	"testing"

	"google.golang.org/grpc/codes"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// A namespace's allowed host resources narrow the server's host policy:
// VMs, pools and replica sets (their templates) and AddVolume are refused
// what the namespace leaves out, naming the field, the value, the
// namespace and what it allows; what it allows passes.
func TestNamespaceAllowedAdmission(t *testing.T) {
	f := newFixtureWith(t, Options{Validation: validation.Options{HostPolicy: &validation.HostPolicy{
		ForwardAddresses: []netip.Addr{netip.MustParseAddr("127.0.0.1")},
		ForwardPorts:     []validation.PortRange{{First: 1024, Last: 65535}},
		Bridges:          []string{"br0", "br9"},
	}}})
	ctx := t.Context()
	nss := apiv1.NewNamespacesClient(f.conn)
	if _, err := nss.Create(ctx, &apiv1.CreateNamespaceRequest{Namespace: &apiv1.Namespace{
		Metadata: &apiv1.ObjectMeta{Name: apiv1.DefaultNamespace},
		Spec: &apiv1.NamespaceSpec{Allowed: &apiv1.NamespaceAllowed{
			Bridges:           &apiv1.StringList{Items: []string{"br0"}},
			PortForwardRanges: &apiv1.StringList{Items: []string{"20000-20999"}},
			StorageClasses:    &apiv1.StringList{Items: []string{""}},
		}},
	}}); err != nil {
		t.Fatal(err)
	}
	net0 := "spec.template.spec.networks[0]"

	vm := validVM("br9")
	bridged(vm.Spec.Template.Spec, "br9")
	_, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm})
	wantRefusedBy(t, err, `bridge "br9" is not allowed in namespace default (allowed: br0)`, net0+".bridge.bridge")

	vm = validVM("fwd")
	forwarding(vm.Spec.Template.Spec, &apiv1.PortForward{HostPort: 8080, GuestPort: 80})
	_, err = f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm})
	wantRefusedBy(t, err, `host port "8080" is not allowed in namespace default (allowed: 20000-20999)`, net0+".user.port_forwards[0].host_port")

	// What the namespace allows passes.
	vm = validVM("ok")
	bridged(vm.Spec.Template.Spec, "br0")
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
		t.Fatalf("VM on an allowed bridge: %v", err)
	}
	vm = validVM("okfwd")
	forwarding(vm.Spec.Template.Spec, &apiv1.PortForward{HostPort: 20001, GuestPort: 80})
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
		t.Fatalf("VM forwarding an allowed port: %v", err)
	}

	// An update to a bridge the namespace does not allow.
	cur, err := f.vms.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: key("ok")})
	if err != nil {
		t.Fatal(err)
	}
	bridged(cur.Spec.Template.Spec, "br9")
	_, err = f.vms.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: cur})
	wantRefusedBy(t, err, `bridge "br9" is not allowed in namespace default`, net0+".bridge.bridge")

	// AddVolume on a storage class the namespace does not allow.
	req := addVolumeReq("data", "scsi", "1Gi")
	req.Key = key("ok")
	req.Volume.StorageClass = "ceph"
	_, err = f.vms.AddVolume(ctx, req)
	wantRefusedBy(t, err, `storage class "ceph" is not allowed in namespace default (allowed: "" (the node's disk))`, "volume.storage_class")

	pool := validPool("pool")
	bridged(pool.Spec.VirtualMachineTemplate.Spec.Template.Spec, "br9")
	_, err = f.pools().Create(ctx, &apiv1.CreatePoolRequest{Pool: pool})
	wantRefusedBy(t, err, `bridge "br9" is not allowed in namespace default`, "spec.virtual_machine_template.spec.template.spec.networks[0].bridge.bridge")

	rs := validRS("rs")
	bridged(rs.Spec.Template.Spec, "br9")
	_, err = f.replicaSets().Create(ctx, &apiv1.CreateReplicaSetRequest{ReplicaSet: rs})
	wantRefusedBy(t, err, `bridge "br9" is not allowed in namespace default`, net0+".bridge.bridge")
	if code(err) != codes.InvalidArgument {
		t.Fatalf("refusal code %v, want InvalidArgument", code(err))
	}
}
