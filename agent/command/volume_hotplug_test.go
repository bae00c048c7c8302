package command

import (
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// addvolume and removevolume against the real API server: the template
// gets and loses a hotpluggable disk, bad input is refused naming the
// request's field, and a disk that is not hotpluggable is not removed.
func TestScenarioAddRemoveVolume(t *testing.T) {
	s := newScenario(t)
	ep := "unix://" + s.socket
	vm := &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "db"},
		Spec: &apiv1.VirtualMachineSpec{RunStrategy: apiv1.RunStrategyHalted, Template: &apiv1.VirtualMachineInstanceTemplateSpec{
			Spec: &apiv1.VirtualMachineInstanceSpec{
				Domain: &apiv1.DomainSpec{
					Memory:  &apiv1.Memory{Guest: "128Mi"},
					Devices: &apiv1.Devices{Disks: []*apiv1.Disk{{Name: "root"}}},
				},
				Volumes: []*apiv1.Volume{{Name: "root", Persistent: &apiv1.PersistentVolume{Size: "64Mi"}}},
			},
		}},
	}
	if _, err := s.c.VMs.Create(s.ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, ep, "addvolume", "db", "--volume-name", "scratch", "--size", "32Mi", "--bus", "scsi", "--serial", "SCRATCH-1")
	if !strings.Contains(out, "virtualmachine default/db: volume scratch added") {
		t.Fatalf("addvolume printed %q", out)
	}
	got, err := s.c.VMs.Get(s.ctx, &apiv1.GetVirtualMachineRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: "db"}})
	if err != nil {
		t.Fatal(err)
	}
	spec := got.GetSpec().GetTemplate().GetSpec()
	d, v := spec.GetDomain().GetDevices().GetDisks(), spec.GetVolumes()
	if len(d) != 2 || d[1].GetName() != "scratch" || d[1].GetDisk().GetBus() != "scsi" || d[1].GetSerial() != "SCRATCH-1" ||
		len(v) != 2 || !v[1].GetPersistent().GetHotpluggable() || v[1].GetPersistent().GetSize() != "32Mi" {
		t.Fatalf("after addvolume: disks %v volumes %v", d, v)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"addvolume", "db", "--volume-name", "cd", "--size", "1Gi", "--bus", "sata"}, "disk.disk.bus: Unsupported value: \"sata\""},
		{[]string{"addvolume", "db", "--volume-name", "scratch", "--size", "1Gi"}, "disk.name: Duplicate value: \"scratch\""},
		{[]string{"addvolume", "db", "--volume-name", "big", "--size", "lots"}, "volume.size"},
		{[]string{"addvolume", "db", "--volume-name", "x", "--size", "1Gi", "--storage-class", "nope"}, "storage_class"},
		{[]string{"addvolume", "nope", "--volume-name", "x", "--size", "1Gi"}, `virtualmachine "nope" not found`},
		{[]string{"addvolume", "db", "--size", "1Gi"}, `required flag(s) "volume-name" not set`},
		{[]string{"removevolume", "db", "--volume-name", "root"}, `volume "root" is not hotpluggable`},
		{[]string{"removevolume", "db", "--volume-name", "gone"}, "name: Not found: \"gone\""},
	} {
		_, _, err := run(t, ep, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}

	out = mustRun(t, ep, "removevolume", "db", "--volume-name", "scratch")
	if !strings.Contains(out, "volume scratch removed") {
		t.Fatalf("removevolume printed %q", out)
	}
	got, err = s.c.VMs.Get(s.ctx, &apiv1.GetVirtualMachineRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: "db"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.GetSpec().GetTemplate().GetSpec().GetVolumes()); n != 1 {
		t.Fatalf("after removevolume: %d volumes, want 1", n)
	}
}
