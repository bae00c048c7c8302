package e2e

import (
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

// snapshotTimeout bounds a snapshot or a restore of the tests' volumes
// (a few MiB to 256 MiB copied on a loaded host).
const snapshotTimeout = 2 * time.Minute

// counterVM is a guest VM whose persistent volume "data" (vdb) carries
// the test guest's boot counter (testguest.Persist), with a root image
// volume so that the persistent one is not the only disk. extra goes onto
// the kernel command line ("virtplane.tick").
func (c *cluster) counterVM(name, strategy, dataImage, dataSize string, extra ...testguest.Option) *apiv1.VirtualMachine {
	opts := append([]testguest.Option{testguest.Hostname("vp-" + name), testguest.Persist("/dev/vdb")}, extra...)
	vm := c.guestVM(name, strategy, testguest.Cmdline(opts...)+" virtplane.tick")
	disks := []*apiv1.Disk{
		{Name: "scratch", Disk: &apiv1.DiskTarget{Bus: "virtio"}},
		{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}},
	}
	vols := []*apiv1.Volume{
		{Name: "scratch", Persistent: &apiv1.PersistentVolume{Size: "4Mi"}},
		{Name: "data", Persistent: &apiv1.PersistentVolume{Size: dataSize, Image: dataImage}},
	}
	return withDisks(vm, disks, vols)
}

// boot waits for VM name to run an instance other than notUID and for the
// guest to write its boot counter, and returns the instance, its console,
// the counter line it found and the count it wrote.
func (c *cluster) boot(name, notUID string) (*apiv1.VirtualMachineInstance, *console, string, string) {
	c.t.Helper()
	vmi := c.waitRunning(name, notUID)
	con := c.console(vmi.GetMetadata().GetUid())
	prev := con.waitMarker(testguest.MarkerPersistPrevious, bootTimeout)
	wrote := testguest.Fields(con.waitMarker(testguest.MarkerPersistWrote, stateTimeout))["boot"]
	return vmi, con, prev, wrote
}

// restartVM restarts VM name (a new instance) and waits for its boot.
func (c *cluster) restartVM(name string) (*apiv1.VirtualMachineInstance, *console, string, string) {
	c.t.Helper()
	old := c.vmi(name).GetMetadata().GetUid()
	if _, err := c.api.VMs.Restart(c.ctx, &apiv1.RestartVirtualMachineRequest{Key: c.key(name)}); err != nil {
		c.t.Fatal(err)
	}
	return c.boot(name, old)
}

// stopVM stops VM name and waits until it has no instance.
func (c *cluster) stopVM(name string) {
	c.t.Helper()
	if _, err := c.api.VMs.Stop(c.ctx, &apiv1.StopVirtualMachineRequest{Key: c.key(name)}); err != nil {
		c.t.Fatal(err)
	}
	c.waitPrintable(name, apiv1.PrintableStopped, stateTimeout)
}

func (c *cluster) startVM(name string) {
	c.t.Helper()
	if _, err := c.api.VMs.Start(c.ctx, &apiv1.StartVirtualMachineRequest{Key: c.key(name)}); err != nil {
		c.t.Fatal(err)
	}
}

// snapshotVM creates snapshot name of VM vm.
func (c *cluster) snapshotVM(name, vm string) {
	c.t.Helper()
	_, err := c.api.Snapshots.Create(c.ctx, &apiv1.CreateSnapshotRequest{Snapshot: &apiv1.VirtualMachineSnapshot{
		Metadata: &apiv1.ObjectMeta{Namespace: c.ns, Name: name},
		Spec:     &apiv1.VirtualMachineSnapshotSpec{Source: vm},
	}})
	c.must(err)
}

func (c *cluster) getSnapshot(name string) *apiv1.VirtualMachineSnapshot {
	c.t.Helper()
	s, err := c.api.Snapshots.Get(c.ctx, &apiv1.GetSnapshotRequest{Key: c.key(name)})
	c.must(err)
	return s
}

// waitSnapshot waits until snapshot name is Succeeded or Failed.
func (c *cluster) waitSnapshot(name string) *apiv1.VirtualMachineSnapshot {
	c.t.Helper()
	var s *apiv1.VirtualMachineSnapshot
	testutil.Eventually(c.t, snapshotTimeout, "snapshot "+name+" final", func() bool {
		s = c.getSnapshot(name)
		p := s.GetStatus().GetPhase()
		return p == apiv1.SnapshotSucceeded || p == apiv1.SnapshotFailed
	})
	return s
}

// mustSnapshot takes snapshot name of vm and waits until it is ready.
func (c *cluster) mustSnapshot(name, vm string) *apiv1.VirtualMachineSnapshot {
	c.t.Helper()
	began := time.Now()
	c.snapshotVM(name, vm)
	s := c.waitSnapshot(name)
	c.t.Logf("snapshot %s of %s: %s in %s, indications %v, volumes %v", name, vm, s.GetStatus().GetPhase(),
		time.Since(began).Round(time.Millisecond), s.GetStatus().GetIndications(), s.GetStatus().GetIncludedVolumes())
	if s.GetStatus().GetPhase() != apiv1.SnapshotSucceeded || !s.GetStatus().GetReadyToUse() {
		c.t.Fatalf("snapshot %s: phase %s ready %v error %q", name, s.GetStatus().GetPhase(), s.GetStatus().GetReadyToUse(), s.GetStatus().GetError())
	}
	testutil.Eventually(c.t, stateTimeout, vm+" unlocked", func() bool { return c.vm(vm).GetStatus().GetSnapshotInProgress() == "" })
	return s
}

func (c *cluster) restoreVM(name, vm, snapshot string) {
	c.t.Helper()
	_, err := c.api.Restores.Create(c.ctx, &apiv1.CreateRestoreRequest{Restore: &apiv1.VirtualMachineRestore{
		Metadata: &apiv1.ObjectMeta{Namespace: c.ns, Name: name},
		Spec:     &apiv1.VirtualMachineRestoreSpec{Target: vm, Snapshot: snapshot},
	}})
	c.must(err)
}

func (c *cluster) getRestore(name string) *apiv1.VirtualMachineRestore {
	c.t.Helper()
	r, err := c.api.Restores.Get(c.ctx, &apiv1.GetRestoreRequest{Key: c.key(name)})
	c.must(err)
	return r
}

// waitRestore waits until restore name is complete or Failed.
func (c *cluster) waitRestore(name string) *apiv1.VirtualMachineRestore {
	c.t.Helper()
	var r *apiv1.VirtualMachineRestore
	testutil.Eventually(c.t, snapshotTimeout, "restore "+name+" final", func() bool {
		r = c.getRestore(name)
		return r.GetStatus().GetComplete() || r.GetStatus().GetPhase() == apiv1.RestoreFailed
	})
	return r
}

// mustRestore restores snapshot into vm and waits until it is complete.
func (c *cluster) mustRestore(name, vm, snapshot string) *apiv1.VirtualMachineRestore {
	c.t.Helper()
	began := time.Now()
	c.restoreVM(name, vm, snapshot)
	r := c.waitRestore(name)
	c.t.Logf("restore %s of %s into %s: %s in %s", name, snapshot, vm, r.GetStatus().GetPhase(), time.Since(began).Round(time.Millisecond))
	if !r.GetStatus().GetComplete() {
		c.t.Fatalf("restore %s: phase %s error %q", name, r.GetStatus().GetPhase(), r.GetStatus().GetError())
	}
	if got := c.vm(vm).GetStatus().GetRestoreInProgress(); got != "" {
		c.t.Errorf("%s still locked by restore %q after it completed", vm, got)
	}
	return r
}

// snapshotsDir is the node's directory of snapshot data.
func (c *cluster) snapshotsDir() string {
	return filepath.Join(c.nodeDir, "snapshots")
}

// filesUnder lists the regular files under dir (relative paths); a
// missing dir has none.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// volumeFiles lists what VM uid's volumes directory holds.
func (c *cluster) volumeFiles(vmUID string) []string {
	return filesUnder(c.t, nodedir.VolumesDir(c.vmDir(vmUID)))
}

// domainDiskSources are the source files of the running domain's disks
// (virsh domblklist), to see that no snapshot overlay is left active.
func (c *cluster) domainDiskSources(name string) []string {
	c.t.Helper()
	out, err := virsh("domblklist", c.domain(name))
	c.must(err)
	var srcs []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && strings.HasPrefix(f[1], "/") {
			srcs = append(srcs, f[1])
		}
	}
	return srcs
}

// qemuImgCheck runs qemu-img check on a copy (shared lock: a running
// guest's base file may be checked too).
func qemuImgCheck(t *testing.T, path string) {
	t.Helper()
	if out, err := exec.Command("qemu-img", "check", "-U", path).CombinedOutput(); err != nil {
		t.Errorf("qemu-img check %s: %v\n%s", path, err, out)
	}
}

// randomImage writes a raw image of size MiB of random bytes into the
// node image directory, so that copying a volume made from it takes
// long enough for a test to catch the node agent in the middle.
func randomImage(t *testing.T, name string, mib int) string {
	t.Helper()
	path := filepath.Join(env.imageDir, name)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(path) })
	src, err := os.Open("/dev/urandom")
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	buf := make([]byte, 1<<20)
	for range mib {
		if _, err := io.ReadFull(src, buf); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return name
}
