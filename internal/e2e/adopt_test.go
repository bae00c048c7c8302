package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"libvirt.org/go/libvirtxml"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// TestAdoptRunningDomain is issue 35's acceptance for adoption: a domain
// made with `virsh define` and `virsh start` (the test guest booting a
// kernel from the node image directory, its boot counter on a raw disk in
// a directory the node allows adoption from) is mapped by a dry run,
// adopted by `virtplane-agent adopt` with the same QEMU process, its
// serial console works through virtplane both ways, and stop and start
// then work through virtplane: the guest boots again, from a copy of the
// same disk, with the counter one up. In between, its launcher and the
// node agent are killed: the domain stays the VM's, QEMU untouched.
func TestAdoptRunningDomain(t *testing.T) {
	t.Parallel()
	requireEnv(t)
	// QEMU (libvirt-qemu) must traverse to the disk: 0755, under /tmp.
	adoptDir, err := os.MkdirTemp("", "vpe2e-adopt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(adoptDir) })
	if err := os.Chmod(adoptDir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := newCluster(t, clusterOptions{adoptDirs: []string{adoptDir}})
	domain := "adopt-" + c.ns

	// The domain, made outside virtplane: a 64 MiB raw disk for the boot
	// counter, user networking, a serial pty whose output virtlogd also
	// logs into a file of the test's.
	disk := filepath.Join(adoptDir, "data.raw")
	makeRawDisk(t, disk, 64<<20)
	bootLog := filepath.Join(adoptDir, "boot.log")
	defineDomain(t, adoptedGuest(domain, disk, bootLog))
	if _, err := virsh("start", domain); err != nil {
		t.Fatal(err)
	}
	boot := followConsole(t, bootLog)
	wrote := testguest.Fields(boot.waitMarker(testguest.MarkerPersistWrote, bootTimeout))
	if wrote["boot"] != "1" {
		t.Fatalf("the domain's first boot wrote boot=%s", wrote["boot"])
	}
	boot.waitMarker(testguest.MarkerBooted, bootTimeout)
	pid := qemuPid(t, domain)

	// A dry run maps it and makes nothing.
	out, errOut, err := c.cliRun("adopt", domain, "--node", c.node, "--name", "web", "--dry-run")
	if err != nil {
		t.Fatalf("adopt --dry-run: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	for _, want := range []string{"maps to the VM " + c.ns + "/web", "vda: " + disk + " (raw, 64Mi)", "kernel: " + env.kernel, "user: {}", "dry run: nothing was made"} {
		if !strings.Contains(out, want) {
			t.Errorf("adopt --dry-run output lacks %q:\n%s", want, out)
		}
	}
	if _, err := c.api.VMs.Get(c.ctx, &apiv1.GetVirtualMachineRequest{Key: c.key("web")}); err == nil {
		t.Fatal("a dry run made the VM")
	}

	// Adopted: the same QEMU process, the domain's name kept.
	start := time.Now()
	out, errOut, err = c.cliRun("adopt", domain, "--node", c.node, "--name", "web")
	if err != nil {
		t.Fatalf("adopt: %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	report(t, "adopt: a running domain taken over in %s (CLI call to Adopted)", time.Since(start).Round(time.Millisecond))
	a, err := c.api.Adoptions.Get(c.ctx, &apiv1.GetAdoptionRequest{Key: c.key("web")})
	c.must(err)
	if a.GetStatus().GetPhase() != apiv1.AdoptionAdopted || int(a.GetStatus().GetQemuPid()) != pid {
		t.Fatalf("adoption %v, want Adopted with QEMU pid %d", a.GetStatus(), pid)
	}
	vmi := c.waitRunning("web", "")
	if got := qemuPid(t, domain); got != pid {
		t.Fatalf("QEMU pid %d after the adoption, %d before: the guest was restarted", got, pid)
	}
	if !strings.Contains(boot.text(), "VIRTPLANE-PERSIST-WROTE boot=1") || strings.Contains(boot.text(), "boot=2") {
		t.Fatalf("the guest booted again during the adoption:\n%s", boot.text())
	}
	vmUID := c.vm("web").GetMetadata().GetUid()
	if md, err := virsh("metadata", domain, "--uri", "https://virtplane.io/xmlns/domain/1"); err != nil || !strings.Contains(md, vmi.GetMetadata().GetUid()) {
		t.Errorf("the domain's virtplane metadata: %q, %v", md, err)
	}

	// Its console through virtplane: a line typed in reaches the guest,
	// whose answer comes back through the launcher's copy of the pty.
	follower := c.cli("console", "web")
	inter := c.cli("console", "web", "--interactive")
	line := "adopted-" + randomID(t)
	inter.typeIn(line + "\n")
	follower.waitMarker(markerEcho+" "+line, stateTimeout)
	inter.waitMarker(markerEcho+" "+line, stateTimeout)
	inter.typeIn("\x1d") // Ctrl-]
	_ = inter.wait(stateTimeout)

	// The adopted domain is the VM's as any domain is: its launcher
	// killed, a new one takes it back (the copy of its console too); the
	// node agent killed and started again, it reattaches. QEMU stays.
	old := launcherPids(domain)
	if len(old) != 1 {
		t.Fatalf("launchers of %s: %v", domain, old)
	}
	c.must(syscall.Kill(old[0], syscall.SIGKILL))
	var replaced int
	testutil.Eventually(t, stateTimeout, "a new launcher for the adopted domain", func() bool {
		pids := launcherPids(domain)
		if len(pids) == 1 && pids[0] != old[0] {
			replaced = pids[0]
		}
		return replaced != 0
	})
	// Synced, its handle saved (the agent records a launcher before it
	// syncs): a kill of the agent before that would leave a launcher no
	// record names, which is not what this tests.
	testutil.Eventually(t, stateTimeout, "the new launcher synced", func() bool {
		return len(c.agentLogMatches(1, regexp.MustCompile(`msg="domain synced".* launcher_pid=`+strconv.Itoa(replaced)+` `))) > 0
	})
	c.killAgent()
	c.startAgent()
	testutil.Eventually(t, stateTimeout, "the node agent back", func() bool {
		return len(c.agentLogMatches(2, regexp.MustCompile(`node agent running`))) > 0
	})
	line2 := "again-" + randomID(t)
	inter2 := c.cli("console", "web", "--interactive")
	inter2.typeIn(line2 + "\n")
	inter2.waitMarker(markerEcho+" "+line2, stateTimeout)
	inter2.typeIn("\x1d")
	_ = inter2.wait(stateTimeout)
	if got := qemuPid(t, domain); got != pid {
		t.Fatalf("QEMU pid %d after the launcher and the node agent were killed, %d before", got, pid)
	}
	if v := c.vmi("web"); v.GetMetadata().GetUid() != vmi.GetMetadata().GetUid() || v.GetStatus().GetPhase() != apiv1.PhaseRunning {
		t.Fatalf("instance after the restarts: %s %s", v.GetMetadata().GetUid(), v.GetStatus().GetPhase())
	}
	// A console session is the node agent's: follow again.
	follower = c.cli("console", "web")

	// Stop through virtplane: ACPI, the guest powers off, the domain is
	// virtplane's to undefine.
	if _, _, err := c.cliRun("stop", "web"); err != nil {
		t.Fatal(err)
	}
	follower.waitMarker(testguest.MarkerPoweroff, stateTimeout)
	c.waitPrintable("web", apiv1.PrintableStopped, stateTimeout)
	testutil.Eventually(t, stateTimeout, "the adopted domain undefined", func() bool { return !domainDefined(t, domain) })

	// Start through virtplane: the disk is copied into the VM's volume,
	// the guest boots from it with the counter one up.
	if _, _, err := c.cliRun("start", "web"); err != nil {
		t.Fatal(err)
	}
	vmi2 := c.waitRunning("web", vmi.GetMetadata().GetUid())
	con := c.console(vmi2.GetMetadata().GetUid())
	wrote = testguest.Fields(con.waitMarker(testguest.MarkerPersistWrote, bootTimeout))
	if wrote["boot"] != "2" {
		t.Errorf("after the first start through virtplane the guest wrote boot=%s, want 2 (the adopted disk's counter, one up)", wrote["boot"])
	}
	vol := filepath.Join(nodedir.VolumesDir(c.vmDir(vmUID)), "vda.qcow2")
	if _, err := os.Stat(vol); err != nil {
		t.Errorf("the VM's volume: %v", err)
	}
	if _, err := os.Stat(disk); err != nil {
		t.Errorf("the adopted file is gone (it is copied, never moved): %v", err)
	}
	if !domainDefined(t, c.domain("web")) {
		t.Errorf("the VM runs no domain %s of virtplane's", c.domain("web"))
	}
	if pid2 := qemuPid(t, c.domain("web")); pid2 == 0 || pid2 == pid {
		t.Errorf("QEMU pid %d after a start through virtplane (adopted one: %d)", pid2, pid)
	}
}

// TestAdoptRefusesElementByElement: a domain with a host directory shared
// in and a disk outside the allowed directories is refused by the real
// node, each element with why, and nothing is made.
func TestAdoptRefusesElementByElement(t *testing.T) {
	t.Parallel()
	requireEnv(t)
	adoptDir, err := os.MkdirTemp("", "vpe2e-adopt-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(adoptDir) })
	outside, err := os.MkdirTemp("", "vpe2e-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(outside) })
	c := newCluster(t, clusterOptions{adoptDirs: []string{adoptDir}})
	domain := "refused-" + c.ns
	disk := filepath.Join(outside, "data.raw")
	makeRawDisk(t, disk, 1<<20)
	d := adoptedGuest(domain, disk, filepath.Join(outside, "boot.log"))
	d.Devices.Filesystems = []libvirtxml.DomainFilesystem{{
		AccessMode: "passthrough",
		Source:     &libvirtxml.DomainFilesystemSource{Mount: &libvirtxml.DomainFilesystemSourceMount{Dir: outside}},
		Target:     &libvirtxml.DomainFilesystemTarget{Dir: "host"},
	}}
	defineDomain(t, d) // defined, never started

	out, errOut, err := c.cliRun("adopt", domain, "--node", c.node, "--name", "refused")
	if err == nil {
		t.Fatalf("adopt of a domain that cannot be mapped succeeded:\n%s", out)
	}
	for _, want := range []string{
		"devices.filesystem: a host directory shared into the guest",
		"devices.disk[0] (vda): " + disk + " is outside the directories this node allows adoption from",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("refusals lack %q:\nstdout:\n%s\nstderr:\n%s", want, out, errOut)
		}
	}
	if !strings.Contains(err.Error()+errOut, "cannot be adopted") {
		t.Errorf("error %v, stderr %q", err, errOut)
	}
	if _, err := c.api.VMs.Get(c.ctx, &apiv1.GetVirtualMachineRequest{Key: c.key("refused")}); err == nil {
		t.Error("a refused adoption made the VM")
	}
	if !domainDefined(t, domain) {
		t.Error("the refused domain was touched")
	}
}

// adoptedGuest is the test guest as a domain defined outside virtplane
// (testguest.AdoptableDomain), booting from the e2e image directory.
func adoptedGuest(name, disk, bootLog string) *libvirtxml.Domain {
	return testguest.AdoptableDomain(name, env.imageDir, env.kernel, disk, bootLog)
}

// defineDomain defines d with virsh (from a file: typed XML, no shell),
// and removes it at the test's end whatever happened: destroyed,
// undefined with its NVRAM.
func defineDomain(t *testing.T, d *libvirtxml.Domain) {
	t.Helper()
	x, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), d.Name+".xml")
	if err := os.WriteFile(f, []byte(x), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range launcherPids(d.Name) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_, _ = virsh("destroy", d.Name)
		_, _ = virsh("undefine", d.Name, "--nvram")
	})
	if _, err := virsh("define", f); err != nil {
		t.Fatal(err)
	}
}

// makeRawDisk makes a raw disk of size zero bytes that QEMU may open.
func makeRawDisk(t *testing.T, path string, size int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o660)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// qemuPid is the QEMU process of running domain name, from libvirtd's pid
// file; 0 when there is none.
func qemuPid(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(launcher.DefaultQEMUPidDir, name+".pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s.pid: %v", name, err)
	}
	return pid
}
