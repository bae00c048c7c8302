package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// updateVM applies edit to VM name's latest version and updates it,
// again on a conflict with the controller's status writes; it returns
// the update's error otherwise.
func (c *nsAPI) updateVM(name string, edit func(vm *apiv1.VirtualMachine)) error {
	c.t.Helper()
	for {
		vm := proto.Clone(c.vm(name)).(*apiv1.VirtualMachine)
		edit(vm)
		_, err := c.api.VMs.Update(c.ctx, &apiv1.UpdateVirtualMachineRequest{Vm: vm})
		if status.Code(err) == codes.Aborted {
			continue
		}
		return err
	}
}

// volumeVirtualSize is qemu-img's virtual size of a volume (-U: the
// running guest's QEMU holds its lock).
func volumeVirtualSize(t *testing.T, path string) int64 {
	t.Helper()
	out, err := exec.Command("qemu-img", "info", "-U", "--output=json", path).Output()
	if err != nil {
		t.Fatalf("qemu-img info %s: %v", path, err)
	}
	var info struct {
		VirtualSize int64 `json:"virtual-size"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatal(err)
	}
	return info.VirtualSize
}

// waitGuestSees waits until the guest on con says it sees dev as bytes.
func waitGuestSees(t *testing.T, con *console, dev string, bytes int64) {
	t.Helper()
	testutil.EventuallyNoError(t, bootTimeout, fmt.Sprintf("the guest to see %s as %d bytes", dev, bytes), func() error {
		sizes := testguest.DiskSizes(con.text(), dev)
		if len(sizes) == 0 || sizes[len(sizes)-1] != bytes {
			return fmt.Errorf("sizes it reported: %v", sizes)
		}
		return nil
	})
}

// TestPersistentVolumeGrows is issue 34's "disks that grow" on the local
// class, through the whole stack: raising a running VM's volume size
// grows the volume under the running guest (same instance, no restart
// asked for), which sees the new size; shrinking it or changing its image
// is refused by the API, naming the field; a size raised while the VM is
// stopped is there when the guest boots again, with its data.
func TestPersistentVolumeGrows(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	const dev = "/dev/vda"
	disks := []*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}}
	vols := []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "64Mi"}}}
	cmdline := testguest.Cmdline(testguest.Persist(dev), testguest.DiskSize(dev))
	c.create(withDisks(c.guestVM("grow", apiv1.RunStrategyAlways, cmdline), disks, vols))
	vmi := c.waitRunning("grow", "")
	uid := vmi.GetMetadata().GetUid()
	con := c.console(uid)
	con.waitMarker(testguest.MarkerPersistWrote, bootTimeout)
	waitGuestSees(t, con, dev, 64<<20)
	volume := filepath.Join(nodedir.VolumesDir(c.vmDir(c.vm("grow").GetMetadata().GetUid())), "data.qcow2")

	// Online.
	asked := time.Now()
	c.must(c.updateVM("grow", func(vm *apiv1.VirtualMachine) { vm.Spec.Template.Spec.Volumes[0].Persistent.Size = "128Mi" }))
	testutil.EventuallyNoError(t, stateTimeout, "the volume grown to 128 MiB", func() error {
		if got := volumeVirtualSize(t, volume); got != 128<<20 {
			return fmt.Errorf("qemu-img: volume is %d bytes", got)
		}
		return nil
	})
	grown := time.Since(asked)
	waitGuestSees(t, con, dev, 128<<20)
	// The guest looks every 0.5 s: its figure includes up to that wait.
	t.Logf("online growth: volume grown %s after the update, the guest saw 128 MiB after %s",
		grown.Round(time.Millisecond), time.Since(asked).Round(time.Millisecond))
	if v := c.vmi("grow"); v.GetMetadata().GetUid() != uid || v.GetStatus().GetPhase() != apiv1.PhaseRunning ||
		v.GetSpec().GetVolumes()[0].GetPersistent().GetSize() != "128Mi" {
		t.Fatalf("instance after the growth: uid %s (was %s), phase %s, volumes %v", v.GetMetadata().GetUid(), uid,
			v.GetStatus().GetPhase(), v.GetSpec().GetVolumes())
	}
	testutil.Eventually(t, stateTimeout, "no RestartRequired", func() bool {
		return !apiv1.IsConditionTrue(c.vm("grow").GetStatus().GetConditions(), apiv1.ConditionRestartRequired)
	})

	// Refused: shrinking, another image.
	for _, bad := range []struct {
		edit func(pv *apiv1.PersistentVolume)
		want string
	}{
		{func(pv *apiv1.PersistentVolume) { pv.Size = "64Mi" },
			`spec.template.spec.volumes[0].persistent.size: Invalid value: "64Mi": may not shrink from 128Mi to 64Mi`},
		{func(pv *apiv1.PersistentVolume) { pv.Image = "other.qcow2" },
			`spec.template.spec.volumes[0].persistent.image: Invalid value: "other.qcow2": may not change from none (a blank disk) to "other.qcow2"`},
	} {
		err := c.updateVM("grow", func(vm *apiv1.VirtualMachine) { bad.edit(vm.Spec.Template.Spec.Volumes[0].Persistent) })
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("update: %v, want InvalidArgument with %q", err, bad.want)
		}
	}
	if got := c.vm("grow").GetSpec().GetTemplate().GetSpec().GetVolumes()[0].GetPersistent(); got.GetSize() != "128Mi" || got.GetImage() != "" {
		t.Fatalf("a refused update changed the VM: %v", got)
	}

	// Offline: stopped, grown, started.
	c.must(func() error {
		_, err := c.api.VMs.Stop(c.ctx, &apiv1.StopVirtualMachineRequest{Key: c.key("grow")})
		return err
	}())
	c.waitFinal(uid, stateTimeout)
	c.waitPrintable("grow", apiv1.PrintableStopped, stateTimeout)
	c.must(c.updateVM("grow", func(vm *apiv1.VirtualMachine) { vm.Spec.Template.Spec.Volumes[0].Persistent.Size = "192Mi" }))
	if got := volumeVirtualSize(t, volume); got != 128<<20 {
		t.Errorf("volume grown while nothing runs: %d bytes", got)
	}
	c.must(func() error {
		_, err := c.api.VMs.Start(c.ctx, &apiv1.StartVirtualMachineRequest{Key: c.key("grow")})
		return err
	}())
	second := c.waitRunning("grow", uid)
	con2 := c.console(second.GetMetadata().GetUid())
	if wrote := testguest.Fields(con2.waitMarker(testguest.MarkerPersistWrote, bootTimeout)); wrote["boot"] != "2" {
		t.Errorf("second boot wrote %v, want boot=2: the data did not survive", wrote)
	}
	waitGuestSees(t, con2, dev, 192<<20)
	if sizes := testguest.DiskSizes(con2.text(), dev); sizes[0] != 192<<20 {
		t.Errorf("the guest booted seeing %d bytes, then %v: the volume was not grown before the start", sizes[0], sizes)
	}
	if got := volumeVirtualSize(t, volume); got != 192<<20 {
		t.Errorf("qemu-img: volume is %d bytes, want %d", got, 192<<20)
	}
	if apiv1.IsConditionTrue(c.vm("grow").GetStatus().GetConditions(), apiv1.ConditionRestartRequired) {
		t.Error("RestartRequired after a restart of a VM with a persistent volume")
	}
}
