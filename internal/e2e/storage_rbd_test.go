package e2e

import (
	"fmt"
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// TestRBDVolumeFollowsTheVM: a VM whose persistent volume is on an rbd
// class boots a counter onto it, live-migrates without copying it (no disk
// data in the job), and after a stop it starts on whichever node is asked,
// reading what the last boot wrote: the volume is no node's.
func TestRBDVolumeFollowsTheVM(t *testing.T) {
	t.Parallel()
	c := newMultiNodeCluster(t, mnOptions{ceph: true})
	t.Cleanup(c.dumpOnFailure)
	c.rbdClass("ceph")
	c.waitNodesReach("ceph")
	disks := []*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}}
	vols := []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "64Mi", StorageClass: "ceph"}}}
	vm := withDisks(guestVM(c.ns, "shared", apiv1.RunStrategyAlways, c.nodes[0].Kernel,
		testguest.Cmdline(testguest.Persist("/dev/vda"))+" virtplane.tick"), disks, vols)
	if _, err := c.api.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
		t.Fatal(err)
	}
	first := c.waitRunning("shared")
	a := c.nodeNamed(first.GetStatus().GetNodeName())
	b := c.otherNode(a)
	con := a.console(t, first.GetMetadata().GetUid())
	if wrote := testguest.Fields(con.waitMarker(testguest.MarkerPersistWrote, bootTimeout)); wrote["boot"] != "1" {
		t.Fatalf("first boot wrote %v", wrote)
	}
	cl, _ := sharedCeph.Get(t)
	image := rbdImageOf(c.vm("shared"), "data")
	if out, err := cl.Admin(c.ctx, "rbd", "info", c.cephPool()+"/"+image); err != nil {
		t.Fatalf("the volume's image %s: %v %s", image, err, out)
	}

	// Live migration: nothing of the volume is copied.
	m := c.migrate("shared", b)
	st := m.GetStatus().GetMigrationState()
	t.Logf("migrated: method %s, job %d ms, downtime %d ms, disk %d bytes",
		st.GetMethod(), st.GetProgress().GetElapsedMs(), st.GetProgress().GetDowntimeMs(), st.GetProgress().GetDiskTotalBytes())
	if st.GetMethod() != apiv1.MigrationMethodLive || st.GetProgress().GetDiskTotalBytes() != 0 {
		t.Errorf("method %s with %d disk bytes, want %s and none", st.GetMethod(), st.GetProgress().GetDiskTotalBytes(), apiv1.MigrationMethodLive)
	}

	// Stopped, then started on A again: the counter goes on.
	if _, err := c.api.VMs.Stop(c.ctx, &apiv1.StopVirtualMachineRequest{Key: c.key("shared")}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, stateTimeout, "the VM stopped", func() bool {
		return c.vm("shared").GetStatus().GetPrintableStatus() == apiv1.PrintableStopped
	})
	// Again on a conflict with the controller's status writes.
	if err := c.updateVM("shared", func(vm *apiv1.VirtualMachine) {
		vm.Spec.Template.Spec.NodeSelector = map[string]string{apiv1.LabelNodeName: a.Name}
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.api.VMs.Start(c.ctx, &apiv1.StartVirtualMachineRequest{Key: c.key("shared")}); err != nil {
		t.Fatal(err)
	}
	var second *apiv1.VirtualMachineInstance
	testutil.Eventually(t, bootTimeout, "a new instance running on "+a.Name, func() bool {
		second = c.vmi("shared")
		return second.GetMetadata().GetUid() != first.GetMetadata().GetUid() && second.GetStatus().GetPhase() == apiv1.PhaseRunning
	})
	if second.GetStatus().GetNodeName() != a.Name {
		t.Fatalf("the next instance runs on %s, want %s", second.GetStatus().GetNodeName(), a.Name)
	}
	con2 := a.console(t, second.GetMetadata().GetUid())
	if wrote := testguest.Fields(con2.waitMarker(testguest.MarkerPersistWrote, bootTimeout)); wrote["boot"] != "2" {
		t.Errorf("second boot wrote %v, want boot=2", wrote)
	}

	// Deleting the VM removes its image from the pool.
	if _, err := c.api.VMs.Delete(c.ctx, &apiv1.DeleteVirtualMachineRequest{Key: c.key("shared")}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyNoError(t, stateTimeout, "the volume's image removed", func() error {
		out, err := cl.Admin(c.ctx, "rbd", "ls", c.cephPool())
		if err != nil {
			return err
		}
		if strings.Contains(string(out), image) {
			return fmt.Errorf("pool still has %s", image)
		}
		return nil
	})
}
