package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// failoverTimings are short leases, so that a failover takes seconds. The
// margin covers the launcher's wait for libvirt before it kills QEMU
// itself (5 s) and the kill, as docs/failover.md asks of it.
const (
	foLease, foMargin, foHeartbeat = 10 * time.Second, 8 * time.Second, 2 * time.Second
)

// writerVM is a RestartElsewhere VM whose guest writes a counter to its
// one volume (on class) every second, carrying it on across boots.
func (c *mnCluster) writerVM(name, class string) *apiv1.VirtualMachine {
	disks := []*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}}
	vols := []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "64Mi", StorageClass: class}}}
	vm := withDisks(guestVM(c.ns, name, apiv1.RunStrategyAlways, c.nodes[0].Kernel,
		testguest.Cmdline(testguest.Persist("/dev/vda"), testguest.PersistEvery(time.Second))), disks, vols)
	vm.Spec.NodeFailurePolicy = apiv1.NodeFailurePolicyRestartElsewhere
	return vm
}

// startWriter starts writerVM name on class and waits until its guest has
// written three times: its instance, the node it runs on, the other node
// and its console.
func (c *mnCluster) startWriter(name, class string) (*apiv1.VirtualMachineInstance, *mnNode, *mnNode, *console) {
	c.t.Helper()
	if _, err := c.api.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: c.writerVM(name, class)}); err != nil {
		c.t.Fatal(err)
	}
	first := c.waitRunning(name)
	on := c.nodeNamed(first.GetStatus().GetNodeName())
	con := on.console(c.t, first.GetMetadata().GetUid())
	testutil.Eventually(c.t, bootTimeout, "three writes", func() bool { last, _ := lastWrite(con); return last >= 3 })
	return first, on, c.otherNode(on), con
}

// writes is the write count of a persist marker's fields.
func writes(t *testing.T, marker string) int {
	t.Helper()
	n, err := strconv.Atoi(testguest.Fields(marker)["writes"])
	if err != nil {
		t.Fatalf("marker %q: %v", marker, err)
	}
	return n
}

// lastWrite is the highest write count con shows as reaching the disk,
// and whether a failed write came after it.
func lastWrite(con *console) (last int, failedAfter bool) {
	testguest.EachMarker(con.text(), func(marker, rest string) {
		if marker == testguest.MarkerPersistWriteFailed {
			failedAfter = true
		} else if n, err := strconv.Atoi(testguest.Fields(rest)["writes"]); err == nil && n > last {
			last, failedAfter = n, false
		}
	}, testguest.MarkerPersistWriteFailed, testguest.MarkerPersistWrite)
	return last, failedAfter
}

// freeze stops processes with SIGSTOP until the test ends.
func freeze(t *testing.T, what string, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatalf("stopping %s (%d): %v", what, pid, err)
		}
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	}
}

// TestRBDFailoverFencesTheIsolatedNode is the acceptance of a stateful
// failover on rbd: the node of a RestartElsewhere VM is cut off — its node
// agent, its libvirtd and the VM's launcher stopped, QEMU running on (a
// host whose whole control stack hangs) — and after the lease and the
// margin the VM runs on the other node, its counter going on from the
// last write that reached the volume; the isolated QEMU's writes fail
// once the server has blocklisted its node, before the new instance
// starts: never two writers. The fence is lifted when the node's agent
// registers again.
func TestRBDFailoverFencesTheIsolatedNode(t *testing.T) {
	t.Parallel()
	c := newMultiNodeCluster(t, mnOptions{ceph: true, nodeLease: foLease, heartbeat: foHeartbeat,
		serverArgs: []string{"--fence-margin", foMargin.String()}})
	t.Cleanup(c.dumpOnFailure)
	c.rbdClass("ceph")
	c.waitNodesReach("ceph")
	first, isolated, other, con := c.startWriter("db", "ceph")
	dom := apiv1.DomainName(c.ns, "db")
	qemu := isolated.QEMUPid(dom)
	launchers := launcherPids(dom)
	if qemu <= 0 || len(launchers) != 1 {
		t.Fatalf("QEMU %d, launchers %v", qemu, launchers)
	}

	freeze(t, "the node agent", isolated.Agent.Cmd.Process.Pid)
	freeze(t, "libvirtd", isolated.LibvirtdPid())
	freeze(t, "the launcher", launchers...)
	frozen := time.Now()

	var moved *apiv1.VirtualMachineInstance
	testutil.Eventually(t, foLease+foMargin+2*bootTimeout, "the VM running on "+other.Name, func() bool {
		moved = c.vmi("db")
		return moved.GetMetadata().GetUid() != first.GetMetadata().GetUid() &&
			moved.GetStatus().GetNodeName() == other.Name && moved.GetStatus().GetPhase() == apiv1.PhaseRunning
	})
	t.Logf("running on %s %s after the freeze (lease %s + margin %s)", other.Name, time.Since(frozen).Round(100*time.Millisecond), foLease, foMargin)
	if pid := isolated.QEMUPid(dom); pid != qemu {
		t.Fatalf("the isolated QEMU is %d, was %d: the test needs it running on", pid, qemu)
	}
	// The isolated guest has seen its writes fail.
	testutil.EventuallyNoError(t, stateTimeout, "the isolated guest's writes failing", func() error {
		if _, failed := lastWrite(con); !failed {
			return fmt.Errorf("no failed write after the last good one yet")
		}
		return nil
	})
	lastOld, _ := lastWrite(con)
	con2 := other.console(t, moved.GetMetadata().GetUid())
	prev := writes(t, con2.waitMarker(testguest.MarkerPersistWritesPrevious, bootTimeout))
	if prev != lastOld {
		t.Fatalf("the new instance found writes=%d, the isolated one last wrote writes=%d: a write was lost or came after the fence", prev, lastOld)
	}
	if next := writes(t, con2.waitMarker(testguest.MarkerPersistWrite, stateTimeout)); next != prev+1 {
		t.Fatalf("the new instance wrote writes=%d after finding %d", next, prev)
	}
	// Never two writers: once the new guest writes, the old one's writes
	// all fail.
	testutil.Consistently(t, 5*time.Second, "the isolated guest's writes keep failing", func() bool {
		last, failed := lastWrite(con)
		return last == lastOld && failed
	})
	cl, _ := sharedCeph.Get(t)
	entries, err := cl.Blocklist(c.ctx)
	want := isolated.Addr + ":0/0"
	if err != nil || !contains(entries, want) {
		t.Fatalf("blocklist %v (%v), want %s", entries, err, want)
	}
	sc, err := c.api.StorageClasses.Get(c.ctx, &apiv1.GetStorageClassRequest{Name: "ceph"})
	if err != nil || len(sc.GetStatus().GetFences()) != 1 || sc.Status.Fences[0].GetNode() != isolated.Name {
		t.Fatalf("class fences %v (%v)", sc.GetStatus().GetFences(), err)
	}

	// The node comes back through a restart of its agent: the fence is
	// lifted.
	_ = syscall.Kill(qemu, syscall.SIGKILL) // what the agent's own fence does on return
	resumed := append([]int{isolated.LibvirtdPid()}, launchers...)
	for _, pid := range resumed {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
	if err := isolated.KillAgent(); err != nil {
		t.Fatal(err)
	}
	c.restartNodeAgent(isolated)
	testutil.EventuallyNoError(t, stateTimeout, "the fence lifted", func() error {
		entries, err := cl.Blocklist(c.ctx)
		if err != nil {
			return err
		}
		if contains(entries, want) {
			return fmt.Errorf("still blocklisted: %v", entries)
		}
		sc, err := c.api.StorageClasses.Get(c.ctx, &apiv1.GetStorageClassRequest{Name: "ceph"})
		if err != nil {
			return err
		}
		if len(sc.GetStatus().GetFences()) != 0 {
			return fmt.Errorf("fences %v", sc.GetStatus().GetFences())
		}
		return nil
	})
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// sharedClass makes a shared_filesystem class on a directory every
// harness node sees at one path (a dir under /tmp, outside libvirt's own
// directories: docs/testing.md). No NFS: this kernel has none
// (docs/storage.md, Testing).
func (c *mnCluster) sharedClass(name string) string {
	c.t.Helper()
	dir := filepath.Join("/tmp", "vpshared-"+c.ns+"-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if _, err := c.api.StorageClasses.Create(c.ctx, &apiv1.CreateStorageClassRequest{StorageClass: &apiv1.StorageClass{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Spec:     &apiv1.StorageClassSpec{SharedFilesystem: &apiv1.SharedFilesystemStorage{Path: dir}},
	}}); err != nil {
		c.t.Fatal(err)
	}
	return dir
}

// TestSharedFilesystemFailover: the same on a shared filesystem class,
// where the fence is the node's own: its node agent and libvirtd stop,
// and the VM's launcher, finding libvirt silent when the lease runs out,
// kills QEMU itself; the VM then runs on the other node, its counter
// going on from the last write that reached the file, and the isolated
// QEMU wrote nothing after it.
func TestSharedFilesystemFailover(t *testing.T) {
	t.Parallel()
	c := newMultiNodeCluster(t, mnOptions{nodeLease: foLease, heartbeat: foHeartbeat,
		serverArgs: []string{"--fence-margin", foMargin.String()}})
	t.Cleanup(c.dumpOnFailure)
	c.sharedClass("nas")
	c.waitNodesReach("nas")
	first, isolated, other, con := c.startWriter("db", "nas")
	dom := apiv1.DomainName(c.ns, "db")
	qemu := isolated.QEMUPid(dom)
	freeze(t, "the node agent", isolated.Agent.Cmd.Process.Pid)
	freeze(t, "libvirtd", isolated.LibvirtdPid())
	frozen := time.Now()

	testutil.Eventually(t, foLease+2*foMargin, "the isolated QEMU killed by its launcher", func() bool {
		return syscall.Kill(qemu, 0) != nil
	})
	killedAt := time.Now()
	killedAfter := killedAt.Sub(frozen)
	lastOld, _ := lastWrite(con)
	var moved *apiv1.VirtualMachineInstance
	testutil.Eventually(t, foLease+foMargin+2*bootTimeout, "the VM running on "+other.Name, func() bool {
		moved = c.vmi("db")
		return moved.GetMetadata().GetUid() != first.GetMetadata().GetUid() &&
			moved.GetStatus().GetNodeName() == other.Name && moved.GetStatus().GetPhase() == apiv1.PhaseRunning
	})
	t.Logf("isolated QEMU killed %s after the freeze; the VM running on %s %s after it", killedAfter.Round(100*time.Millisecond),
		other.Name, time.Since(frozen).Round(100*time.Millisecond))
	// Never two writers: the new instance was made after the old QEMU
	// was gone (seen within the poll above, well under 200 ms).
	if made := moved.GetMetadata().GetCreationTimestamp().AsTime(); made.Before(killedAt.Add(-200 * time.Millisecond)) {
		t.Fatalf("the new instance was made at %s, before the isolated QEMU died (%s)", made.Format(time.StampMilli), killedAt.Format(time.StampMilli))
	}
	con2 := other.console(t, moved.GetMetadata().GetUid())
	if prev := writes(t, con2.waitMarker(testguest.MarkerPersistWritesPrevious, bootTimeout)); prev != lastOld {
		t.Fatalf("the new instance found writes=%d, the isolated one last wrote writes=%d", prev, lastOld)
	}
}
