package testguest_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"libvirt.org/go/libvirtxml"

	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// TestBootAndACPIShutdown boots the guest, checks the boot marker, and
// shuts it down the way a graceful stop does: ACPI power button through
// `virsh shutdown`.
func TestBootAndACPIShutdown(t *testing.T) {
	t.Parallel()
	uri := libvirtURI(t)
	// The far-off timer only ends a guest a killed test run left behind;
	// the marker's reason tells it from the ACPI poweroff.
	g := startGuest(t, uri, guestSpec{cmdline: testguest.Cmdline(testguest.Hostname("vp-acpi"), testguest.PoweroffAfter(10*time.Minute))})
	f := g.waitBooted()
	if f["hostname"] != "vp-acpi" {
		t.Errorf("hostname = %q, want vp-acpi", f["hostname"])
	}
	if st := g.domstate(); st != "running (unpaused)" {
		t.Errorf("domstate before shutdown = %q", st)
	}
	if _, err := virsh(uri, "shutdown", g.name); err != nil {
		t.Fatal(err)
	}
	off := testguest.Fields(g.waitMarker(testguest.MarkerPoweroff, stopTimeout))
	if off["reason"] != "acpi" {
		t.Errorf("poweroff reason = %q, want acpi", off["reason"])
	}
	if reason := g.waitStopped(stopTimeout); reason != "shutdown" {
		t.Errorf("shut off with reason %q, want shutdown", reason)
	}
}

// TestPoweroffAfter: the guest powers itself off, which libvirt also
// reports as a shutdown.
func TestPoweroffAfter(t *testing.T) {
	t.Parallel()
	uri := libvirtURI(t)
	g := startGuest(t, uri, guestSpec{cmdline: testguest.Cmdline(testguest.PoweroffAfter(time.Second))})
	g.waitBooted()
	if reason := g.waitStopped(bootTimeout); reason != "shutdown" {
		t.Errorf("shut off with reason %q, want shutdown", reason)
	}
	off, ok := testguest.FindMarker(g.consoleText(), testguest.MarkerPoweroff)
	if !ok || testguest.Fields(off)["reason"] != "timer" {
		t.Errorf("poweroff marker %q (found %v), want reason=timer", off, ok)
	}
}

// TestCrash: a kernel panic reaches libvirt through pvpanic, and
// on_crash=destroy shuts the domain off with reason crashed.
func TestCrash(t *testing.T) {
	t.Parallel()
	uri := libvirtURI(t)
	g := startGuest(t, uri, guestSpec{cmdline: testguest.Cmdline(testguest.Crash(0))})
	g.waitBooted()
	if reason := g.waitStopped(bootTimeout); reason != "crashed" {
		t.Errorf("shut off with reason %q, want crashed", reason)
	}
	console := g.consoleText()
	if _, ok := testguest.FindMarker(console, testguest.MarkerCrash); !ok {
		t.Errorf("no %s marker", testguest.MarkerCrash)
	}
	if !strings.Contains(console, "Kernel panic") {
		t.Errorf("console shows no kernel panic:\n%s", console)
	}
}

// TestPersist boots twice with the same raw disk: the second boot reads
// what the first wrote.
func TestPersist(t *testing.T) {
	t.Parallel()
	uri := libvirtURI(t)
	disk := filepath.Join(workDir(t), "persist.raw")
	if err := os.WriteFile(disk, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := guestSpec{
		cmdline: testguest.Cmdline(testguest.Persist("/dev/vda"), testguest.PoweroffAfter(0)),
		disks: []libvirtxml.DomainDisk{{
			Device: "disk",
			Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
			Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: disk}},
			Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
		}},
	}
	for boot, prev := range []string{"none", testguest.PersistLinePrefix + "1"} {
		g := startGuest(t, uri, spec)
		g.waitBooted()
		if reason := g.waitStopped(bootTimeout); reason != "shutdown" {
			t.Fatalf("boot %d: shut off with reason %q, want shutdown", boot+1, reason)
		}
		console := g.consoleText()
		if got, _ := testguest.FindMarker(console, testguest.MarkerPersistPrevious); got != prev {
			t.Errorf("boot %d: previous = %q, want %q", boot+1, got, prev)
		}
		wrote, _ := testguest.FindMarker(console, testguest.MarkerPersistWrote)
		if want := "boot=" + string(rune('1'+boot)); wrote != want {
			t.Errorf("boot %d: wrote %q, want %q; console:\n%s", boot+1, wrote, want, console)
		}
	}
	b, err := os.ReadFile(disk)
	if err != nil {
		t.Fatal(err)
	}
	if line, _, _ := bytes.Cut(b[:512], []byte("\n")); string(line) != testguest.PersistLinePrefix+"2" {
		t.Errorf("disk starts with %q", line)
	}
}

// TestPersistEvery: the write counter in the second sector goes on from
// the last boot's, and each write is said to have reached the disk.
func TestPersistEvery(t *testing.T) {
	t.Parallel()
	uri := libvirtURI(t)
	disk := filepath.Join(workDir(t), "persist.raw")
	if err := os.WriteFile(disk, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := guestSpec{
		cmdline: testguest.Cmdline(testguest.Persist("/dev/vda"), testguest.PersistEvery(time.Second), testguest.PoweroffAfter(4*time.Second)),
		disks: []libvirtxml.DomainDisk{{
			Device: "disk",
			Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
			Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: disk}},
			Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
		}},
	}
	last := 0
	for boot := range 2 {
		g := startGuest(t, uri, spec)
		g.waitBooted()
		if reason := g.waitStopped(bootTimeout); reason != "shutdown" {
			t.Fatalf("boot %d: shut off with reason %q, want shutdown", boot+1, reason)
		}
		console := g.consoleText()
		prev, _ := testguest.FindMarker(console, testguest.MarkerPersistWritesPrevious)
		if want := "writes=" + strconv.Itoa(last); prev != want {
			t.Fatalf("boot %d: previous %q, want %q; console:\n%s", boot+1, prev, want, console)
		}
		n := 0
		testguest.EachMarker(console, func(_, rest string) {
			n++
			if want := "writes=" + strconv.Itoa(last+n); rest != want {
				t.Errorf("boot %d: write %q, want %q", boot+1, rest, want)
			}
		}, testguest.MarkerPersistWrite)
		if n < 2 {
			t.Fatalf("boot %d: %d writes in 4 s; console:\n%s", boot+1, n, console)
		}
		last += n
	}
}

// TestCIData attaches a cidata ISO as a SATA CD-ROM and checks that the
// guest prints its user-data and meta-data.
func TestCIData(t *testing.T) {
	t.Parallel()
	uri := libvirtURI(t)
	iso := filepath.Join(workDir(t), "cidata.iso")
	userData := "#cloud-config\nhostname: vp-cidata\nruncmd:\n  - echo hello\n"
	metaData := "instance-id: iid-vp-cidata\nlocal-hostname: vp-cidata" // no final newline
	if err := writeISO(iso, "cidata", map[string]string{"user-data": userData, "meta-data": metaData}); err != nil {
		t.Fatal(err)
	}
	g := startGuest(t, uri, guestSpec{
		cmdline: testguest.Cmdline(testguest.CIData(), testguest.PoweroffAfter(0)),
		disks: []libvirtxml.DomainDisk{{
			Device:   "cdrom",
			Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
			Source:   &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: iso}},
			Target:   &libvirtxml.DomainDiskTarget{Dev: "sda", Bus: "sata"},
			ReadOnly: &libvirtxml.DomainDiskReadOnly{},
		}},
	})
	g.waitBooted()
	if reason := g.waitStopped(bootTimeout); reason != "shutdown" {
		t.Errorf("shut off with reason %q, want shutdown", reason)
	}
	console := g.consoleText()
	if got, ok := testguest.Between(console, testguest.MarkerUserdataBegin, testguest.MarkerUserdataEnd); !ok || got != userData {
		t.Errorf("user-data = %q (complete: %v), want %q; console:\n%s", got, ok, userData, console)
	}
	if got, _ := testguest.Between(console, testguest.MarkerMetadataBegin, testguest.MarkerMetadataEnd); got != metaData+"\n" {
		t.Errorf("meta-data = %q, want %q", got, metaData+"\n")
	}
}

// TestNetwork: with a NIC, the guest gets QEMU user networking's lease by
// DHCP and reports each probe. The probed port has no listener (a port
// the test held and closed), so the answer does not depend on the host's
// guest firewall: refused either way. What a guest may reach on the host
// is internal/e2e's TestGuestCannotReachHost. A disk too: the storage and
// net module groups share the virtio modules, loaded once without a
// warning.
func TestNetwork(t *testing.T) {
	t.Parallel()
	uri := libvirtURI(t)
	closed := testutil.FreePort(t, "tcp")
	target := net.JoinHostPort("10.0.2.2", strconv.Itoa(closed))
	disk := filepath.Join(workDir(t), "persist.raw")
	if err := os.WriteFile(disk, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	g := startGuest(t, uri, guestSpec{
		nic:     true,
		cmdline: testguest.Cmdline(testguest.Persist("/dev/vda"), testguest.NetProbe(target), testguest.PoweroffAfter(0)),
		disks: []libvirtxml.DomainDisk{{
			Device: "disk",
			Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
			Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: disk}},
			Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
		}},
	})
	g.waitBooted()
	up := testguest.Fields(g.waitMarker(testguest.MarkerNetUp, bootTimeout))
	if up["ip"] != "10.0.2.15/24" || up["router"] != "10.0.2.2" || up["dns"] != "10.0.2.3" {
		t.Errorf("lease %v, want QEMU's defaults 10.0.2.15/24 via 10.0.2.2, DNS 10.0.2.3", up)
	}
	if done := testguest.Fields(g.waitMarker(testguest.MarkerNetProbeDone, bootTimeout)); done["count"] != "1" {
		t.Errorf("%s %v, want count=1", testguest.MarkerNetProbeDone, done)
	}
	probes, _ := testguest.NetProbes(g.consoleText())
	if p := probes[target]; p.Reached || !strings.Contains(p.Error, "refused") {
		t.Errorf("probe of a closed port: %+v, want refused", p)
	}
	if reason := g.waitStopped(stopTimeout); reason != "shutdown" {
		t.Errorf("shut off with reason %q, want shutdown", reason)
	}
	console := g.consoleText()
	if w, ok := testguest.FindMarker(console, testguest.MarkerWarning); ok {
		t.Errorf("warning %q; console:\n%s", w, console)
	}
	if got, _ := testguest.FindMarker(console, testguest.MarkerPersistWrote); got != "boot=1" {
		t.Errorf("persist wrote %q, want boot=1", got)
	}
}

// TestStaticIPHTTPAndGuestAgent: a guest with a static address (no
// DHCP), the HTTP responder reached through a port forward of QEMU's
// (added as the launcher adds them, by HMP's hostfwd_add), and the guest
// agent stand-in answering libvirt's agent source with that address.
func TestStaticIPHTTPAndGuestAgent(t *testing.T) {
	t.Parallel()
	uri := libvirtURI(t)
	g := startGuest(t, uri, guestSpec{
		nic:   true,
		agent: true,
		cmdline: testguest.Cmdline(testguest.Hostname("vp-ga"), testguest.PoweroffAfter(10*time.Minute),
			testguest.StaticIP(netip.MustParsePrefix("10.0.2.20/24"), netip.MustParseAddr("10.0.2.2")),
			testguest.HTTP(8080), testguest.GuestAgent()),
	})
	g.waitBooted()
	up := testguest.Fields(g.waitMarker(testguest.MarkerNetUp, bootTimeout))
	if up["ip"] != "10.0.2.20/24" || up["router"] != "10.0.2.2" || up["dns"] != "" {
		t.Errorf("%s %v, want the static 10.0.2.20/24 via 10.0.2.2", testguest.MarkerNetUp, up)
	}
	if got := testguest.Fields(g.waitMarker(testguest.MarkerHTTPUp, bootTimeout)); got["port"] != "8080" {
		t.Errorf("%s %v", testguest.MarkerHTTPUp, got)
	}
	g.waitMarker(testguest.MarkerGuestAgentUp, bootTimeout)

	port := testutil.FreePort(t, "tcp")
	rule := fmt.Sprintf("tcp:127.0.0.1:%d-10.0.2.20:8080", port)
	if out, err := virsh(uri, "qemu-monitor-command", "--hmp", g.name, "hostfwd_add "+nicNetdev+" "+rule); err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("hostfwd_add %s: %q, %v", rule, out, err)
	}
	var body string
	testutil.EventuallyNoError(t, 30*time.Second, "an HTTP answer through the port forward", func() error {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		body = string(b)
		return err
	})
	if body != "vp-ga\n" {
		t.Errorf("the guest answered %q, want its hostname", body)
	}

	// libvirt connects to the agent once the guest opened the port;
	// the stand-in's answer is what `virsh domifaddr --source agent`
	// shows.
	testutil.EventuallyNoError(t, 60*time.Second, "the agent to report 10.0.2.20", func() error {
		out, err := virsh(uri, "domifaddr", "--source", "agent", g.name)
		if err != nil {
			return err
		}
		if !strings.Contains(out, "10.0.2.20/24") || !strings.Contains(out, "127.0.0.1/8") {
			return fmt.Errorf("domifaddr --source agent:\n%s", out)
		}
		return nil
	})
}

// TestDiskSize: the guest reports a disk's size, and the new size once
// the disk grows under it (virsh blockresize, what libvirt's block resize
// does for a running domain).
func TestDiskSize(t *testing.T) {
	t.Parallel()
	uri := libvirtURI(t)
	disk := filepath.Join(workDir(t), "grow.raw")
	if err := os.WriteFile(disk, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(disk, 64<<20); err != nil {
		t.Fatal(err)
	}
	g := startGuest(t, uri, guestSpec{
		cmdline: testguest.Cmdline(testguest.DiskSize("/dev/vda"), testguest.PoweroffAfter(10*time.Minute)),
		disks: []libvirtxml.DomainDisk{{
			Device: "disk",
			Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
			Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: disk}},
			Target: &libvirtxml.DomainDiskTarget{Dev: "vda", Bus: "virtio"},
		}},
	})
	g.waitBooted()
	sizes := func(want int64) {
		t.Helper()
		testutil.EventuallyNoError(t, bootTimeout, fmt.Sprintf("the guest to see %d bytes", want), func() error {
			got := testguest.DiskSizes(g.consoleText(), "/dev/vda")
			if len(got) == 0 || got[len(got)-1] != want {
				return fmt.Errorf("sizes seen %v", got)
			}
			return nil
		})
	}
	sizes(64 << 20)
	if _, err := virsh(uri, "blockresize", g.name, "vda", "--size", strconv.Itoa(128<<20)+"B"); err != nil {
		t.Fatal(err)
	}
	sizes(128 << 20)
}
