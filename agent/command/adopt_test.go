package command

import (
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// What adopt prints of a mapping, and how it ends.
func TestAdoptionSummary(t *testing.T) {
	a := &apiv1.VirtualMachineAdoption{
		Metadata: &apiv1.ObjectMeta{Namespace: "prod", Name: "web"},
		Spec:     &apiv1.VirtualMachineAdoptionSpec{NodeName: "node-a", DomainName: "legacy", DryRun: true},
		Status: &apiv1.VirtualMachineAdoptionStatus{
			Phase: apiv1.AdoptionMapped, DomainUuid: "6f1c2a3e-0000-4000-8000-00000000d001", DomainState: "Running", QemuPid: 4242,
			Spec:  &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "160Mi"}}},
			Disks: []*apiv1.AdoptedDisk{{Name: "vda", Path: "/srv/adopt/data.raw", Format: "raw", VirtualSizeBytes: 64 << 20}},
			Notes: []string{"graphics (VNC, SPICE) are not carried"},
		},
	}
	var b strings.Builder
	if err := writeAdoption(&b, a); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"domain legacy on node node-a (uuid 6f1c2a3e-0000-4000-8000-00000000d001, Running, QEMU pid 4242)",
		"maps to the VM prod/web, template spec:\n  domain:\n    memory:\n      guest: 160Mi",
		"  vda: /srv/adopt/data.raw (raw, 64Mi)",
		"  - graphics (VNC, SPICE) are not carried",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := adoptionOutcome(&b, a, true); err != nil || b.String() != "dry run: nothing was made\n" {
		t.Errorf("dry run outcome %q, %v", b.String(), err)
	}
	a.Status.Phase = apiv1.AdoptionRefused
	a.Status.Refusals = []*apiv1.AdoptionRefusal{{Element: "devices.hostdev", Reason: "a host device passed through"}}
	b.Reset()
	if err := writeAdoption(&b, a); err != nil || !strings.Contains(b.String(), "refused:\n  - devices.hostdev: a host device passed through") {
		t.Errorf("refusals: %q, %v", b.String(), err)
	}
	if err := adoptionOutcome(&b, a, true); err == nil || !strings.Contains(err.Error(), "1 element(s) refused") {
		t.Errorf("refused outcome: %v", err)
	}
	a.Status.Phase, a.Status.Message = apiv1.AdoptionFailed, "the VM was deleted"
	if err := adoptionOutcome(&b, a, true); err == nil || !strings.Contains(err.Error(), "the VM was deleted") {
		t.Errorf("failed outcome: %v", err)
	}
}

func TestAdoptFlags(t *testing.T) {
	o := &adoptOptions{rootOptions: &rootOptions{}, timeout: defaultAdoptTimeout}
	if err := o.run(t.Context(), nil, nil, "legacy"); err == nil || !strings.Contains(err.Error(), "--node is required") {
		t.Errorf("no --node: %v", err)
	}
	o.node = "node-a"
	if err := o.run(t.Context(), nil, nil, "Legacy.Web"); err == nil || !strings.Contains(err.Error(), "--name") {
		t.Errorf("a domain name that is no VM name: %v", err)
	}
	o.output = "table"
	if err := o.run(t.Context(), nil, nil, "legacy"); err == nil || !strings.Contains(err.Error(), "--output") {
		t.Errorf("-o table: %v", err)
	}
}
