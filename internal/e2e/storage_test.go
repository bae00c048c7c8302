package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// baseImage creates a small qcow2 base image in the shared image
// directory and returns its name.
func baseImage(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(env.imageDir, name)
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", path, "8M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v: %s", err, out)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(path) })
	return name
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// withDisks gives a guest VM disks and their volumes, in order (virtio
// disks are vda, vdb, ... in that order).
func withDisks(vm *apiv1.VirtualMachine, disks []*apiv1.Disk, vols []*apiv1.Volume) *apiv1.VirtualMachine {
	s := vm.Spec.Template.Spec
	s.Domain.Devices = &apiv1.Devices{Disks: disks}
	s.Volumes = vols
	return vm
}

// TestImagePersistentAndCloudInit is issue 5's acceptance: a VM with an
// image volume, a persistent volume and a cloud-init seed boots and sees
// its user data; what the guest writes to the persistent volume survives
// stop and start; a second VM runs from the same image at the same time;
// deleting the VM removes its persistent volume; the base image never
// changes.
func TestImagePersistentAndCloudInit(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	image := baseImage(t, "e2e-base-"+c.ns+".qcow2")
	baseSum := fileSHA256(t, filepath.Join(env.imageDir, image))
	userData := "#cloud-config\nhostname: vp-e2e-store\n# from " + c.ns + "\n"

	disks := []*apiv1.Disk{
		{Name: "root", Disk: &apiv1.DiskTarget{Bus: "virtio"}},
		{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}},
		{Name: "seed", Cdrom: &apiv1.CDRomTarget{Bus: "sata"}},
	}
	vols := []*apiv1.Volume{
		{Name: "root", Image: &apiv1.ImageVolume{Name: image}},
		{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "16Mi"}},
		{Name: "seed", CloudInitNoCloud: &apiv1.CloudInitNoCloud{UserData: userData}},
	}
	cmdline := testguest.Cmdline(testguest.Hostname("vp-e2e-store"), testguest.CIData(), testguest.Persist("/dev/vdb"))
	c.create(withDisks(c.guestVM("store", apiv1.RunStrategyAlways, cmdline), disks, vols))

	// A second VM from the same image, at the same time.
	c.create(withDisks(c.guestVM("twin", apiv1.RunStrategyAlways, testguest.Cmdline(testguest.Hostname("vp-e2e-twin"))),
		disks[:1], vols[:1]))

	vmi := c.waitRunning("store", "")
	uid := vmi.GetMetadata().GetUid()
	if !containsStatus(c.rec.statuses("store"), apiv1.PrintableProvisioning) {
		t.Logf("Provisioning not seen (a blank volume is created in milliseconds); statuses %v", c.rec.statuses("store"))
	}
	con := c.console(uid)
	con.waitMarker(testguest.MarkerBooted, bootTimeout)
	con.waitMarker(testguest.MarkerUserdataEnd, stateTimeout)
	con.waitMarker(testguest.MarkerMetadataEnd, stateTimeout)
	got, _ := testguest.Between(con.text(), testguest.MarkerUserdataBegin, testguest.MarkerUserdataEnd)
	if got != userData {
		t.Errorf("guest read user data %q, want %q", got, userData)
	}
	md, _ := testguest.Between(con.text(), testguest.MarkerMetadataBegin, testguest.MarkerMetadataEnd)
	if !strings.Contains(md, "instance-id: "+uid) || !strings.Contains(md, "local-hostname: store") {
		t.Errorf("guest read meta-data %q, want instance-id %s and local-hostname store", md, uid)
	}
	if prev := con.waitMarker(testguest.MarkerPersistPrevious, stateTimeout); prev != "none" {
		t.Errorf("first boot found %q on a new persistent volume", prev)
	}
	if wrote := testguest.Fields(con.waitMarker(testguest.MarkerPersistWrote, stateTimeout)); wrote["boot"] != "1" {
		t.Fatalf("first boot wrote %v", wrote)
	}
	vm := c.vm("store")
	if vm.GetStatus().GetNodeName() != c.node {
		t.Errorf("status.node_name %q, want %s", vm.GetStatus().GetNodeName(), c.node)
	}
	volume := filepath.Join(nodedir.VolumesDir(c.vmDir(vm.GetMetadata().GetUid())), "data.qcow2")
	if _, err := os.Stat(volume); err != nil {
		t.Fatalf("persistent volume: %v", err)
	}
	twin := c.waitRunning("twin", "")
	c.console(twin.GetMetadata().GetUid()).waitMarker(testguest.MarkerBooted, bootTimeout)

	// Stop and start: the new instance reads what the first one wrote.
	if _, err := c.api.VMs.Stop(c.ctx, &apiv1.StopVirtualMachineRequest{Key: c.key("store")}); err != nil {
		t.Fatal(err)
	}
	c.waitFinal(uid, stateTimeout)
	c.waitPrintable("store", apiv1.PrintableStopped, stateTimeout)
	if _, err := os.Stat(volume); err != nil {
		t.Fatalf("persistent volume after stop: %v", err)
	}
	if _, err := c.api.VMs.Start(c.ctx, &apiv1.StartVirtualMachineRequest{Key: c.key("store")}); err != nil {
		t.Fatal(err)
	}
	second := c.waitRunning("store", uid)
	if sel := second.GetSpec().GetNodeSelector()[apiv1.LabelNodeName]; sel != c.node {
		t.Errorf("second instance not pinned to the volume's node: selector %v", second.GetSpec().GetNodeSelector())
	}
	con2 := c.console(second.GetMetadata().GetUid())
	if prev := con2.waitMarker(testguest.MarkerPersistPrevious, bootTimeout); prev != "VIRTPLANE-PERSIST boot=1" {
		t.Errorf("second boot found %q, want the first boot's marker", prev)
	}
	if wrote := testguest.Fields(con2.waitMarker(testguest.MarkerPersistWrote, stateTimeout)); wrote["boot"] != "2" {
		t.Errorf("second boot wrote %v", wrote)
	}
	con2.waitMarker(testguest.MarkerMetadataEnd, stateTimeout)
	md2, _ := testguest.Between(con2.text(), testguest.MarkerMetadataBegin, testguest.MarkerMetadataEnd)
	if !strings.Contains(md2, "instance-id: "+second.GetMetadata().GetUid()) {
		t.Errorf("second instance's meta-data %q does not carry its own uid", md2)
	}

	// Deleting the VM removes its volume; the base image is untouched.
	vmDir := filepath.Dir(filepath.Dir(volume))
	for _, name := range []string{"store", "twin"} {
		if _, err := c.api.VMs.Delete(c.ctx, &apiv1.DeleteVirtualMachineRequest{Key: c.key(name)}); err != nil {
			t.Fatal(err)
		}
	}
	deleted := time.Now()
	testutil.Eventually(c.t, stateTimeout, "the VMs gone", func() bool { return len(c.domainsOnHost()) == 0 })
	testutil.Eventually(c.t, stateTimeout, "the persistent volume removed", func() bool {
		_, err := os.Stat(vmDir)
		return os.IsNotExist(err)
	})
	t.Logf("persistent volume removed %s after the delete call", time.Since(deleted).Round(time.Millisecond))
	if sum := fileSHA256(t, filepath.Join(env.imageDir, image)); sum != baseSum {
		t.Errorf("base image changed: sha256 %s, was %s", sum, baseSum)
	}
}

func containsStatus(statuses []string, want string) bool {
	for _, s := range statuses {
		if s == want {
			return true
		}
	}
	return false
}
