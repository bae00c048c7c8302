package provider

import (
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The data source shows a VM's node and addresses only from its own
// instance.
func TestVMSummariesNodeFromOwnInstance(t *testing.T) {
	vm := vmWith("Running", true, 1)
	withAddress := func(vmi *apiv1.VirtualMachineInstance) *apiv1.VirtualMachineInstance {
		vmi.Status.Interfaces = []*apiv1.InterfaceStatus{{Name: "default", IpAddress: "10.0.2.15"}}
		return vmi
	}
	bare := withAddress(vmiWith("y", "Running", true))
	bare.Metadata.OwnerReferences = nil
	for _, c := range []struct {
		name   string
		vmi    *apiv1.VirtualMachineInstance
		want   string
		ifaces int
	}{
		{"own", withAddress(vmiWith("mine", "Running", true)), "n1", 1},
		{"bare", bare, "", 0},
	} {
		var diags diagsT
		got := vmSummaries([]*apiv1.VirtualMachine{vm}, []*apiv1.VirtualMachineInstance{c.vmi}, "", &diags.d)
		if len(got) != 1 || got[0].Node.ValueString() != c.want || len(got[0].Interfaces.Elements()) != c.ifaces || diags.d.HasError() {
			t.Errorf("%s instance: summaries %+v (%v), want node %q and %d interface(s)", c.name, got, diags.d, c.want, c.ifaces)
		}
	}
}
