package e2e

import (
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

const persistBoot = "VIRTPLANE-PERSIST boot="

// TestSnapshotRestoreBootCounter is issue 20's first acceptance point: the
// boot counter on a persistent volume stands at 3, a snapshot is taken,
// two more boots count to 5, the VM stops, the snapshot is restored, and
// the next boot writes 4. Then: deleting the VM keeps the snapshot, which
// restores into a new VM of another name; deleting that VM with its
// snapshots removes their data from the node.
func TestSnapshotRestoreBootCounter(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.create(c.counterVM("counter", apiv1.RunStrategyAlways, "", "16Mi"))
	if _, _, _, wrote := c.boot("counter", ""); wrote != "1" {
		t.Fatalf("first boot wrote %q", wrote)
	}
	for want := 2; want <= 3; want++ {
		if _, _, _, wrote := c.restartVM("counter"); wrote != string(rune('0'+want)) {
			t.Fatalf("boot %d wrote %q", want, wrote)
		}
	}
	c.stopVM("counter")
	vmUID := c.vm("counter").GetMetadata().GetUid()

	snap := c.mustSnapshot("at-3", "counter")
	st := snap.GetStatus()
	if len(st.GetIndications()) != 0 {
		t.Errorf("offline snapshot has indications %v, want none", st.GetIndications())
	}
	if got := slices.Sorted(slices.Values(st.GetIncludedVolumes())); !slices.Equal(got, []string{"data", "scratch"}) {
		t.Errorf("included volumes %v, want [data scratch]", got)
	}
	if st.GetSourceUid() != vmUID || st.GetNodeName() != c.node || st.GetCreationTime() == nil {
		t.Errorf("snapshot status %v: want source uid %s, node %s and a creation time", st, vmUID, c.node)
	}
	content, err := c.api.SnapshotContents.Get(c.ctx, &apiv1.GetSnapshotContentRequest{Key: c.key(st.GetContentName())})
	c.must(err)
	if n := len(content.GetStatus().GetVolumeBackups()); n != 2 {
		t.Fatalf("content has %d volume backups, want 2: %v", n, content.GetStatus())
	}
	for _, b := range content.GetStatus().GetVolumeBackups() {
		if !strings.HasPrefix(b.GetPath(), c.snapshotsDir()+"/") || b.GetVirtualSizeBytes() <= 0 || b.GetSizeBytes() <= 0 {
			t.Errorf("volume backup %v: want a file under %s with its sizes", b, c.snapshotsDir())
		}
		qemuImgCheck(t, b.GetPath())
	}

	c.startVM("counter")
	if _, _, prev, wrote := c.boot("counter", ""); prev != persistBoot+"3" || wrote != "4" {
		t.Fatalf("boot after the snapshot found %q and wrote %q, want boot=3 and 4", prev, wrote)
	}
	if _, _, _, wrote := c.restartVM("counter"); wrote != "5" {
		t.Fatalf("fifth boot wrote %q", wrote)
	}
	c.stopVM("counter")

	r := c.mustRestore("back-to-3", "counter", "at-3")
	t.Logf("restore: %v", r.GetStatus())
	if got := c.vm("counter").GetMetadata().GetAnnotations()[apiv1.AnnotationLastRestore]; got != apiv1.LastRestoreValue("back-to-3", r.GetMetadata().GetUid()) {
		t.Errorf("VM annotation %s = %q", apiv1.AnnotationLastRestore, got)
	}
	if got := c.volumeFiles(vmUID); !slices.Equal(slices.Sorted(slices.Values(got)), []string{"data.qcow2", "scratch.qcow2"}) {
		t.Errorf("volumes directory after the restore holds %v, want only the two volumes", got)
	}
	c.startVM("counter")
	if _, _, prev, wrote := c.boot("counter", ""); prev != persistBoot+"3" || wrote != "4" {
		t.Fatalf("boot after the restore found %q and wrote %q, want boot=3 and 4", prev, wrote)
	}

	// Deleting the VM keeps its snapshot and the snapshot's data.
	c.stopVM("counter")
	_, err = c.api.VMs.Delete(c.ctx, &apiv1.DeleteVirtualMachineRequest{Key: c.key("counter")})
	c.must(err)
	testutil.Eventually(t, stateTimeout, "VM counter gone", func() bool {
		_, err := c.api.VMs.Get(c.ctx, &apiv1.GetVirtualMachineRequest{Key: c.key("counter")})
		return status.Code(err) == codes.NotFound
	})
	if s := c.getSnapshot("at-3"); !s.GetStatus().GetReadyToUse() {
		t.Fatalf("snapshot after its VM's deletion: %v", s.GetStatus())
	}
	if len(filesUnder(t, c.snapshotsDir())) != 2 {
		t.Fatalf("snapshot data after the VM's deletion: %v", filesUnder(t, c.snapshotsDir()))
	}

	// It restores into a new VM, made halted on the snapshot's node.
	c.mustRestore("revive", "counter-again", "at-3")
	again := c.vm("counter-again")
	if again.GetSpec().GetRunStrategy() != apiv1.RunStrategyHalted || again.GetStatus().GetNodeName() != c.node {
		t.Errorf("restored VM: run strategy %q node %q, want Halted on %s", again.GetSpec().GetRunStrategy(), again.GetStatus().GetNodeName(), c.node)
	}
	c.startVM("counter-again")
	if _, _, prev, wrote := c.boot("counter-again", ""); prev != persistBoot+"3" || wrote != "4" {
		t.Fatalf("new VM from the snapshot found %q and wrote %q, want boot=3 and 4", prev, wrote)
	}
	c.stopVM("counter-again")

	// Deleting a VM with its snapshots removes the snapshot data. The
	// new VM is not the snapshot's source, so its snapshot goes by name.
	_, err = c.api.Snapshots.Delete(c.ctx, &apiv1.DeleteSnapshotRequest{Key: c.key("at-3")})
	c.must(err)
	testutil.Eventually(t, stateTimeout, "snapshot at-3 and its data gone", func() bool {
		_, err := c.api.Snapshots.Get(c.ctx, &apiv1.GetSnapshotRequest{Key: c.key("at-3")})
		return status.Code(err) == codes.NotFound && len(filesUnder(t, c.snapshotsDir())) == 0
	})
	c.mustSnapshot("of-again", "counter-again")
	_, err = c.api.VMs.Delete(c.ctx, &apiv1.DeleteVirtualMachineRequest{Key: c.key("counter-again"), DeleteSnapshots: true})
	c.must(err)
	testutil.Eventually(t, stateTimeout, "snapshot of-again and its data gone with its VM", func() bool {
		_, err := c.api.Snapshots.Get(c.ctx, &apiv1.GetSnapshotRequest{Key: c.key("of-again")})
		return status.Code(err) == codes.NotFound && len(filesUnder(t, c.snapshotsDir())) == 0
	})
}

// TestOnlineSnapshotKeepsGuestRunning is issue 20's second acceptance
// point: a snapshot of a running guest with a guest agent freezes and
// thaws its file systems, the guest keeps running (its console counter
// goes on without a gap, no reboot), the domain ends up on its volume
// files again, and the snapshot restores to a disk the guest boots from
// and reads.
func TestOnlineSnapshotKeepsGuestRunning(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.create(c.counterVM("live", apiv1.RunStrategyAlways, "", "16Mi", testguest.GuestAgent()))
	vmi, con, _, wrote := c.boot("live", "")
	if wrote != "1" {
		t.Fatalf("first boot wrote %q", wrote)
	}
	con.waitMarker(testguest.MarkerGuestAgentUp, stateTimeout)
	// libvirt takes the agent for connected on its port event, a moment
	// after the guest opens the port: only then can a freeze reach it.
	agentUp := regexp.MustCompile(`"msg":"guest agent event".*"connected":true`)
	testutil.Eventually(t, stateTimeout, "libvirt to see the guest agent", func() bool {
		return len(logMatches(filepath.Join(c.nodeDir, "logs", c.domain("live")+".log"), agentUp)) > 0
	})
	cons := []*console{con}
	testutil.Eventually(t, stateTimeout, "the counter to run", func() bool { return maxTick(cons) >= 20 })
	before := maxTick(cons)

	snap := c.mustSnapshot("online", "live")
	ind := snap.GetStatus().GetIndications()
	if !slices.Contains(ind, apiv1.IndicationOnline) || !slices.Contains(ind, apiv1.IndicationGuestAgent) {
		t.Errorf("online snapshot indications %v, want Online and GuestAgent", ind)
	}
	text := con.text()
	frozen, thawed := strings.Index(text, testguest.MarkerGuestAgentFreeze+" state=frozen"), strings.Index(text, testguest.MarkerGuestAgentFreeze+" state=thawed")
	if frozen < 0 || thawed < frozen {
		t.Errorf("guest console: freeze at %d, thaw at %d; want a freeze then a thaw", frozen, thawed)
	}
	testutil.Eventually(t, stateTimeout, "the counter to go on after the snapshot", func() bool { return maxTick(cons) >= before+20 })
	if gaps := tickGaps(cons); len(gaps) > 0 {
		t.Errorf("counter skipped %v during the snapshot", gaps)
	}
	if cur := c.vmi("live"); cur.GetMetadata().GetUid() != vmi.GetMetadata().GetUid() || cur.GetStatus().GetPhase() != apiv1.PhaseRunning {
		t.Fatalf("instance changed or stopped during the snapshot: %v", cur.GetStatus())
	}
	if n := testguest.CountMarker(con.text(), testguest.MarkerBooted); n != 1 {
		t.Errorf("guest booted %d times", n)
	}
	vmUID := c.vm("live").GetMetadata().GetUid()
	for _, src := range c.domainDiskSources("live") {
		if strings.Contains(src, ".snap-") {
			t.Errorf("domain still writes to snapshot overlay %s", src)
		}
	}
	if got := slices.Sorted(slices.Values(c.volumeFiles(vmUID))); !slices.Equal(got, []string{"data.qcow2", "scratch.qcow2"}) {
		t.Errorf("volumes directory holds %v after the snapshot, want the two volumes only", got)
	}
	content, err := c.api.SnapshotContents.Get(c.ctx, &apiv1.GetSnapshotContentRequest{Key: c.key(snap.GetStatus().GetContentName())})
	c.must(err)
	for _, b := range content.GetStatus().GetVolumeBackups() {
		qemuImgCheck(t, b.GetPath())
	}

	// Another boot counts on, then the restore brings the snapshot's
	// volume back: the guest boots from it and finds boot=1.
	if _, _, prev, wrote := c.restartVM("live"); prev != persistBoot+"1" || wrote != "2" {
		t.Fatalf("boot after the snapshot found %q and wrote %q", prev, wrote)
	}
	c.stopVM("live")
	c.mustRestore("undo", "live", "online")
	c.startVM("live")
	if _, _, prev, wrote := c.boot("live", ""); prev != persistBoot+"1" || wrote != "2" {
		t.Fatalf("boot from the restored volume found %q and wrote %q, want boot=1 and 2", prev, wrote)
	}
}

// TestCloneIsIndependent is issue 20's third acceptance point: a clone of
// a running VM boots as a separate guest with its own copy of the volume
// and new MAC addresses; what it writes does not reach the source.
func TestCloneIsIndependent(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	src := c.counterVM("src", apiv1.RunStrategyAlways, "", "16Mi")
	spec := src.GetSpec().GetTemplate().GetSpec()
	spec.Domain.Devices.Interfaces = []*apiv1.Interface{{Name: "net0"}}
	spec.Networks = []*apiv1.Network{{Name: "net0", User: &apiv1.UserNetwork{}}}
	c.create(src)
	if _, _, _, wrote := c.boot("src", ""); wrote != "1" {
		t.Fatalf("first boot wrote %q", wrote)
	}

	_, err := c.api.Clones.Create(c.ctx, &apiv1.CreateCloneRequest{Clone: &apiv1.VirtualMachineClone{
		Metadata: &apiv1.ObjectMeta{Namespace: c.ns, Name: "copy"},
		Spec:     &apiv1.VirtualMachineCloneSpec{SourceName: "src", Target: "dst", Labels: map[string]string{"cloned": "yes"}},
	}})
	c.must(err)
	var clone *apiv1.VirtualMachineClone
	testutil.Eventually(t, snapshotTimeout, "clone final", func() bool {
		clone, err = c.api.Clones.Get(c.ctx, &apiv1.GetCloneRequest{Key: c.key("copy")})
		c.must(err)
		p := clone.GetStatus().GetPhase()
		return p == apiv1.CloneSucceeded || p == apiv1.CloneFailed
	})
	if clone.GetStatus().GetPhase() != apiv1.CloneSucceeded {
		t.Fatalf("clone: %v", clone.GetStatus())
	}
	// What the clone made on the way is gone.
	testutil.Eventually(t, stateTimeout, "the clone's snapshot and restore deleted", func() bool {
		snaps, err := c.api.Snapshots.List(c.ctx, &apiv1.ListSnapshotsRequest{Options: &apiv1.ListOptions{Namespace: c.ns}})
		c.must(err)
		rs, err := c.api.Restores.List(c.ctx, &apiv1.ListRestoresRequest{Options: &apiv1.ListOptions{Namespace: c.ns}})
		c.must(err)
		return len(snaps.GetItems()) == 0 && len(rs.GetItems()) == 0 && len(filesUnder(t, c.snapshotsDir())) == 0
	})

	srcVM, dstVM := c.vm("src"), c.vm("dst")
	if dstVM.GetMetadata().GetLabels()["cloned"] != "yes" || dstVM.GetStatus().GetNodeName() != c.node {
		t.Errorf("clone: labels %v node %q", dstVM.GetMetadata().GetLabels(), dstVM.GetStatus().GetNodeName())
	}
	srcMAC := srcVM.GetSpec().GetTemplate().GetSpec().GetDomain().GetDevices().GetInterfaces()[0].GetMacAddress()
	dstMAC := dstVM.GetSpec().GetTemplate().GetSpec().GetDomain().GetDevices().GetInterfaces()[0].GetMacAddress()
	if srcMAC == "" || dstMAC == "" || srcMAC == dstMAC {
		t.Errorf("MAC addresses: source %q, clone %q; want two different ones", srcMAC, dstMAC)
	}

	c.startVM("dst")
	if _, _, prev, wrote := c.boot("dst", ""); prev != persistBoot+"1" || wrote != "2" {
		t.Fatalf("clone's first boot found %q and wrote %q, want the source's boot=1 and 2", prev, wrote)
	}
	if _, _, prev, wrote := c.restartVM("src"); prev != persistBoot+"1" || wrote != "2" {
		t.Fatalf("source after the clone wrote found %q and wrote %q: the clone's write reached it", prev, wrote)
	}
	if _, _, prev, _ := c.restartVM("dst"); prev != persistBoot+"2" {
		t.Fatalf("clone's second boot found %q, want its own boot=2", prev)
	}
}
