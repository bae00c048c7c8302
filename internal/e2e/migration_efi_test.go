package e2e

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// EFI guests migrate, and their variables go with them (issue 34's
// acceptance: "an EFI guest migrates A → B → A and boots again after a
// stop/start with its EFI variables"). OVMF counts its boots in the
// variable MTC of the VM's NVRAM (testguest.BootCount): a boot from the
// firmware's template makes it 1, so a count that goes on across the
// nodes is the variables having followed the guest.

// efiMigration is one run of the acceptance scenario on a VM already
// created: boot on A, migrate to B, reboot there (OVMF boots again: MTC
// 2), migrate back to A, stop, and start on the node end chooses. store
// reads the NVRAM's MTC where the VM's NVRAM lives for a node it runs on.
type efiMigration struct {
	c     *mnCluster
	name  string
	store func(n *mnNode) (uint32, error)
	// afterMove checks a migration from one node to another (the stale
	// copy gone, say).
	afterMove func(from, to *mnNode)
}

// wantBootCount waits until the VM's NVRAM, as seen for node n, says
// want boots: OVMF writes it early in a boot, QEMU on a migration's
// target when the guest resumes there.
func (e *efiMigration) wantBootCount(n *mnNode, want uint32, when string) {
	e.c.t.Helper()
	testutil.EventuallyNoError(e.c.t, stateTimeout, fmt.Sprintf("MTC %d %s", want, when), func() error {
		got, err := e.store(n)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("MTC is %d", got)
		}
		return nil
	})
	e.c.t.Logf("%s: MTC %d in the NVRAM seen from %s", when, want, n.Name)
}

// followVMI follows the console log of instance uid on n from its start.
func (e *efiMigration) followVMI(n *mnNode, uid string) *console {
	d, err := nodedir.Layout{Root: n.NodeDir}.VMIDir(uid)
	if err != nil {
		e.c.t.Fatal(err)
	}
	con := followConsole(e.c.t, nodedir.ConsoleLogPath(d))
	e.c.t.Cleanup(con.close)
	return con
}

// waitEFIBoot waits for the guest's boot marker on con and checks that
// OVMF started it.
func (e *efiMigration) waitEFIBoot(con *console, when string) {
	e.c.t.Helper()
	if fw := testguest.Fields(con.waitMarker(testguest.MarkerBooted, diskBootTimeout))["firmware"]; fw != "efi" {
		e.c.t.Fatalf("%s: the guest booted through firmware=%q, want efi", when, fw)
	}
}

// run plays the scenario and returns the node of the last instance.
func (e *efiMigration) run(startOn func(a, b *mnNode) *mnNode) *mnNode {
	c, t := e.c, e.c.t
	first := c.waitRunning(e.name)
	uid := first.GetMetadata().GetUid()
	a := c.nodeNamed(first.GetStatus().GetNodeName())
	b := c.otherNode(a)
	e.waitEFIBoot(e.followVMI(a, uid), "first boot on "+a.Name)
	e.wantBootCount(a, 1, "after the first boot on "+a.Name)
	testutil.Eventually(t, stateTimeout, "LiveMigratable", func() bool {
		return apiv1.IsConditionTrue(c.vmi(e.name).GetStatus().GetConditions(), apiv1.ConditionLiveMigratable)
	})

	m := c.migrate(e.name, b)
	st := m.GetStatus().GetMigrationState()
	t.Logf("%s → %s: %s, job %d ms, downtime %d ms, disk %d bytes", a.Name, b.Name, st.GetMethod(),
		st.GetProgress().GetElapsedMs(), st.GetProgress().GetDowntimeMs(), st.GetProgress().GetDiskTotalBytes())
	e.wantBootCount(b, 1, "after the migration to "+b.Name)
	if e.afterMove != nil {
		e.afterMove(a, b)
	}

	// The guest reboots on B (as `reboot` in it would): OVMF starts from
	// B's store and counts one more boot.
	onB := e.followVMI(b, uid)
	if _, err := b.Virsh(c.ctx, "reset", c.domain(e.name)); err != nil {
		t.Fatal(err)
	}
	e.waitEFIBoot(onB, "reboot on "+b.Name)
	e.wantBootCount(b, 2, "after the reboot on "+b.Name)

	m = c.migrate(e.name, a)
	st = m.GetStatus().GetMigrationState()
	t.Logf("%s → %s: %s, job %d ms, downtime %d ms", b.Name, a.Name, st.GetMethod(),
		st.GetProgress().GetElapsedMs(), st.GetProgress().GetDowntimeMs())
	e.wantBootCount(a, 2, "after the migration back to "+a.Name)
	if e.afterMove != nil {
		e.afterMove(b, a)
	}
	if v := c.vmi(e.name); v.GetMetadata().GetUid() != uid || v.GetStatus().GetPhase() != apiv1.PhaseRunning {
		t.Fatalf("after two migrations: instance %s %s, want %s running", v.GetMetadata().GetUid(), v.GetStatus().GetPhase(), uid)
	}

	// Stop, then start on the node the scenario names: the firmware
	// boots from the variables the guest had.
	if _, err := c.api.VMs.Stop(c.ctx, &apiv1.StopVirtualMachineRequest{Key: c.key(e.name)}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, stateTimeout, "the VM stopped", func() bool {
		return c.vm(e.name).GetStatus().GetPrintableStatus() == apiv1.PrintableStopped
	})
	to := startOn(a, b)
	// The VM controller writes the VM's status meanwhile: an update
	// that lost the race is made again on the newer VM.
	testutil.EventuallyNoError(t, stateTimeout, "the VM pinned to "+to.Name, func() error {
		vm := c.vm(e.name)
		vm.Spec.Template.Spec.NodeSelector = map[string]string{apiv1.LabelNodeName: to.Name}
		_, err := c.api.VMs.Update(c.ctx, &apiv1.UpdateVirtualMachineRequest{Vm: vm})
		if status.Code(err) == codes.Aborted {
			return err
		}
		if err != nil {
			t.Fatal(err)
		}
		return nil
	})
	if _, err := c.api.VMs.Start(c.ctx, &apiv1.StartVirtualMachineRequest{Key: c.key(e.name)}); err != nil {
		t.Fatal(err)
	}
	var second *apiv1.VirtualMachineInstance
	testutil.Eventually(t, diskBootTimeout, "a new instance running on "+to.Name, func() bool {
		second = c.vmi(e.name)
		return second.GetMetadata().GetUid() != uid && second.GetStatus().GetPhase() == apiv1.PhaseRunning
	})
	if second.GetStatus().GetNodeName() != to.Name {
		t.Fatalf("the next instance runs on %s, want %s", second.GetStatus().GetNodeName(), to.Name)
	}
	e.waitEFIBoot(e.followVMI(to, second.GetMetadata().GetUid()), "boot after the stop, on "+to.Name)
	e.wantBootCount(to, 3, "after the stop and start on "+to.Name)
	return to
}

// TestEFIGuestMigratesWithItsNVRAM: an EFI guest whose NVRAM is a file
// in its node directory (no volume on a storage class) migrates A → B →
// A; the NVRAM goes with the migration stream, the node it left removes
// its stale copy, and after a stop the guest starts on A with the
// variables it had on B.
func TestEFIGuestMigratesWithItsNVRAM(t *testing.T) {
	t.Parallel()
	c := newMultiNodeCluster(t, mnOptions{serverArgs: loopbackImageSource})
	t.Cleanup(c.dumpOnFailure)
	image := c.efiImage()
	c.create(diskVM(c.ns, "efi", image, &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{}}))
	vmUID := c.vm("efi").GetMetadata().GetUid()
	nvramOn := func(n *mnNode) string {
		dir, err := nodedir.Layout{Root: n.NodeDir}.VMDir(vmUID)
		if err != nil {
			t.Fatal(err)
		}
		return nodedir.NVRAMPath(dir)
	}
	e := &efiMigration{c: c, name: "efi",
		store: func(n *mnNode) (uint32, error) {
			b, err := os.ReadFile(nvramOn(n))
			if err != nil {
				return 0, err
			}
			return testguest.BootCount(b)
		},
		// The node the guest left holds no copy of its variables: a later
		// start there must never boot the old ones.
		afterMove: func(from, _ *mnNode) {
			testutil.Eventually(t, stateTimeout, "the NVRAM left on "+from.Name+" removed", func() bool {
				_, err := os.Stat(nvramOn(from))
				return os.IsNotExist(err)
			})
		},
	}
	e.run(func(a, _ *mnNode) *mnNode { return a })
}

// TestEFIGuestMigratesWithItsNVRAMOnRBD: an EFI guest whose disk is a
// volume on an rbd class keeps its NVRAM there too, as an image made from
// the firmware's VARS template: it migrates A → B → A copying nothing
// (the disk and the variables are the pool's), no node holds a copy of
// the variables, and after a stop it starts on B with them.
func TestEFIGuestMigratesWithItsNVRAMOnRBD(t *testing.T) {
	t.Parallel()
	c := newMultiNodeCluster(t, mnOptions{ceph: true, serverArgs: loopbackImageSource})
	t.Cleanup(c.dumpOnFailure)
	c.rbdClass("ceph")
	c.waitNodesReach("ceph")
	image := c.efiImage()
	vm := diskVM(c.ns, "efi", image, &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{}})
	vm.Spec.Template.Spec.Volumes[0] = &apiv1.Volume{Name: "root",
		Persistent: &apiv1.PersistentVolume{Size: "64Mi", Image: image, StorageClass: "ceph"}}
	c.create(vm)
	vmUID := c.vm("efi").GetMetadata().GetUid()
	cl, _ := sharedCeph.Get(t)
	nvram := c.cephPool() + "/" + ceph.NVRAMImage(vmUID)
	noLocalCopy := func() {
		for _, n := range c.nodes {
			dir, err := nodedir.Layout{Root: n.NodeDir}.VMDir(vmUID)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(nodedir.NVRAMPath(dir)); !os.IsNotExist(err) {
				t.Errorf("%s holds an NVRAM file of the VM: %v", n.Name, err)
			}
		}
	}
	e := &efiMigration{c: c, name: "efi",
		store: func(*mnNode) (uint32, error) {
			b, err := cl.Admin(c.ctx, "rbd", "export", "--no-progress", nvram, "-")
			if err != nil {
				return 0, err
			}
			return testguest.BootCount(b)
		},
		afterMove: func(_, _ *mnNode) {
			st := c.lastMigration("efi").GetStatus().GetMigrationState()
			if st.GetMethod() != apiv1.MigrationMethodLive || st.GetProgress().GetDiskTotalBytes() != 0 {
				t.Errorf("method %s with %d disk bytes, want %s and none", st.GetMethod(), st.GetProgress().GetDiskTotalBytes(), apiv1.MigrationMethodLive)
			}
			noLocalCopy()
		},
	}
	e.run(func(_, b *mnNode) *mnNode { return b })
	noLocalCopy()
	out, err := cl.Admin(c.ctx, "rbd", "info", nvram)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the NVRAM image:\n%s", out)
}

// TestSecureBootGuestMigrates: a guest with Secure Boot on (OVMF's
// enrolled build, SMM) migrates too, with its variables: the enrolled
// template starts at MTC 1 (Debian booted it once to enroll the keys),
// so the guest's first boot makes 2, which the target's store holds after
// the migration, with the platform key. The test image's GRUB is
// unsigned, so OVMF refuses to boot it and stays in its boot manager: the
// guest runs, with no boot marker.
func TestSecureBootGuestMigrates(t *testing.T) {
	t.Parallel()
	c := newMultiNodeCluster(t, mnOptions{serverArgs: loopbackImageSource})
	t.Cleanup(c.dumpOnFailure)
	image := c.efiImage()
	c.create(diskVM(c.ns, "sb", image, &apiv1.Bootloader{Efi: &apiv1.EFIBootloader{SecureBoot: true}}))
	vmUID := c.vm("sb").GetMetadata().GetUid()
	store := func(n *mnNode) ([]byte, error) {
		dir, err := nodedir.Layout{Root: n.NodeDir}.VMDir(vmUID)
		if err != nil {
			t.Fatal(err)
		}
		return os.ReadFile(nodedir.NVRAMPath(dir))
	}
	e := &efiMigration{c: c, name: "sb", store: func(n *mnNode) (uint32, error) {
		b, err := store(n)
		if err != nil {
			return 0, err
		}
		return testguest.BootCount(b)
	}}
	first := c.waitRunning("sb")
	a := c.nodeNamed(first.GetStatus().GetNodeName())
	b := c.otherNode(a)
	e.wantBootCount(a, 2, "after the first boot on "+a.Name)
	m := c.migrate("sb", b)
	st := m.GetStatus().GetMigrationState()
	t.Logf("%s → %s: job %d ms, downtime %d ms", a.Name, b.Name, st.GetProgress().GetElapsedMs(), st.GetProgress().GetDowntimeMs())
	e.wantBootCount(b, 2, "after the migration to "+b.Name)
	vars, err := store(b)
	if err != nil {
		t.Fatal(err)
	}
	list, err := testguest.EFIVariables(vars)
	if err != nil || !slices.ContainsFunc(list, func(v testguest.EFIVariable) bool { return v.Name == "PK" }) {
		t.Fatalf("the target's store holds no platform key (%v)", err)
	}
	testutil.EventuallyNoError(t, stateTimeout, "sb on "+b.Name+" only", func() error { return c.runsOnlyOn("sb", b) })
	if v := c.vmi("sb"); v.GetMetadata().GetUid() != first.GetMetadata().GetUid() || v.GetStatus().GetPhase() != apiv1.PhaseRunning {
		t.Fatalf("after the migration: %s %s", v.GetMetadata().GetUid(), v.GetStatus().GetPhase())
	}
}
