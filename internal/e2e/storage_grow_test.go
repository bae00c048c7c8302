package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// TestVolumesGrowOnEveryClass: running guests' volumes on the local, rbd
// and shared-filesystem classes grow when their size is raised, the
// guests seeing the new size without a restart; raised again while the
// VMs are stopped, they start on the bigger volumes.
func TestVolumesGrowOnEveryClass(t *testing.T) {
	t.Parallel()
	c := newMultiNodeCluster(t, mnOptions{ceph: true})
	t.Cleanup(c.dumpOnFailure)
	c.rbdClass("ceph")
	nas := c.sharedClass("nas")
	c.waitNodesReach("ceph")
	c.waitNodesReach("nas")
	const dev = "/dev/vda"
	classes := map[string]string{"grow-local": "", "grow-rbd": "ceph", "grow-nas": "nas"}
	cons := map[string]*console{}
	for name, class := range classes {
		disks := []*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}}
		vols := []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "64Mi", StorageClass: class}}}
		vm := withDisks(guestVM(c.ns, name, apiv1.RunStrategyAlways, c.nodes[0].Kernel,
			testguest.Cmdline(testguest.Persist(dev), testguest.DiskSize(dev))), disks, vols)
		if _, err := c.api.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
			t.Fatal(err)
		}
	}
	uids := map[string]string{}
	for name := range classes {
		v := c.waitRunning(name)
		uids[name] = v.GetMetadata().GetUid()
		cons[name] = c.nodeNamed(v.GetStatus().GetNodeName()).console(t, uids[name])
		cons[name].waitMarker(testguest.MarkerPersistWrote, bootTimeout)
		waitGuestSees(t, cons[name], dev, 64<<20)
	}

	asked := time.Now()
	for name := range classes {
		if err := c.updateVM(name, func(vm *apiv1.VirtualMachine) { vm.Spec.Template.Spec.Volumes[0].Persistent.Size = "128Mi" }); err != nil {
			t.Fatal(err)
		}
	}
	for name := range classes {
		waitGuestSees(t, cons[name], dev, 128<<20)
		t.Logf("%s: the guest saw 128 MiB %s after the update", name, time.Since(asked).Round(time.Millisecond))
		if v := c.vmi(name); v.GetMetadata().GetUid() != uids[name] {
			t.Fatalf("%s restarted to grow: instance %s, was %s", name, v.GetMetadata().GetUid(), uids[name])
		}
	}
	if got := rbdSize(t, c, rbdImageOf(c.vm("grow-rbd"), "data")); got != 128<<20 {
		t.Fatalf("rbd image is %d bytes after the online growth", got)
	}

	// The shared file is locked by its QEMU: a second writer is refused
	// (what keeps a replacement out while the first guest lives).
	shared := filepath.Join(nas, "virtplane", "vms", c.vm("grow-nas").GetMetadata().GetUid(), "volumes", "data.qcow2")
	if out, err := exec.CommandContext(c.ctx, "qemu-img", "info", shared).CombinedOutput(); err == nil || !strings.Contains(string(out), "lock") {
		t.Fatalf("qemu-img info of the running guest's shared volume: %v %s, want a lock refusal", err, out)
	}
	// Volumes on classes migrate without a copy; the local one is copied.
	for name, method := range map[string]string{"grow-rbd": apiv1.MigrationMethodLive, "grow-nas": apiv1.MigrationMethodLive, "grow-local": apiv1.MigrationMethodBlock} {
		to := c.otherNode(c.nodeNamed(c.vmi(name).GetStatus().GetNodeName()))
		st := c.migrate(name, to).GetStatus().GetMigrationState()
		disk := st.GetProgress().GetDiskTotalBytes()
		t.Logf("%s migrated: method %s, %d disk bytes", name, st.GetMethod(), disk)
		if st.GetMethod() != method || (method == apiv1.MigrationMethodLive) != (disk == 0) {
			t.Errorf("%s migrated with method %s and %d disk bytes, want %s", name, st.GetMethod(), disk, method)
		}
	}

	// Offline: stopped, raised, started.
	for name := range classes {
		if _, err := c.api.VMs.Stop(c.ctx, &apiv1.StopVirtualMachineRequest{Key: c.key(name)}); err != nil {
			t.Fatal(err)
		}
	}
	for name := range classes {
		testutil.Eventually(t, stateTimeout, name+" stopped", func() bool {
			return c.vm(name).GetStatus().GetPrintableStatus() == apiv1.PrintableStopped
		})
		if err := c.updateVM(name, func(vm *apiv1.VirtualMachine) { vm.Spec.Template.Spec.Volumes[0].Persistent.Size = "192Mi" }); err != nil {
			t.Fatal(err)
		}
		if _, err := c.api.VMs.Start(c.ctx, &apiv1.StartVirtualMachineRequest{Key: c.key(name)}); err != nil {
			t.Fatal(err)
		}
	}
	for name := range classes {
		var v *apiv1.VirtualMachineInstance
		testutil.Eventually(t, bootTimeout, name+" running again", func() bool {
			v = c.vmi(name)
			return v.GetMetadata().GetUid() != uids[name] && v.GetStatus().GetPhase() == apiv1.PhaseRunning
		})
		con := c.nodeNamed(v.GetStatus().GetNodeName()).console(t, v.GetMetadata().GetUid())
		if wrote := testguest.Fields(con.waitMarker(testguest.MarkerPersistWrote, bootTimeout)); wrote["boot"] != "2" {
			t.Errorf("%s: second boot wrote %v, want boot=2", name, wrote)
		}
		waitGuestSees(t, con, dev, 192<<20)
		if sizes := testguest.DiskSizes(con.text(), dev); sizes[0] != 192<<20 {
			t.Errorf("%s booted seeing %d bytes: the volume was not grown before the start", name, sizes[0])
		}
	}
}

// rbdSize is the size of an image of the shared cluster's pool.
func rbdSize(t *testing.T, c *mnCluster, image string) int64 {
	t.Helper()
	cl, _ := sharedCeph.Get(t)
	out, err := cl.Admin(c.ctx, "rbd", "info", "--format", "json", c.cephPool()+"/"+image)
	if err != nil {
		t.Fatalf("rbd info %s: %v %s", image, err, out)
	}
	var info struct {
		Size int64 `json:"size"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatal(fmt.Errorf("rbd info %s: %w", image, err))
	}
	return info.Size
}
