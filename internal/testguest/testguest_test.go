package testguest_test

import (
	"maps"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
)

func TestCmdline(t *testing.T) {
	base := "console=ttyS0 quiet panic=-1 "
	for _, tc := range []struct {
		opts []testguest.Option
		want string // after the base and speed-up arguments
	}{
		{nil, ""},
		{[]testguest.Option{testguest.PoweroffAfter(1500 * time.Millisecond)}, "virtplane.poweroff_after=2"},
		{[]testguest.Option{testguest.PoweroffAfter(0)}, "virtplane.poweroff_after=0"},
		{[]testguest.Option{testguest.Crash(0)}, "virtplane.crash"},
		{[]testguest.Option{testguest.Crash(3 * time.Second)}, "virtplane.crash virtplane.crash_after=3"},
		{[]testguest.Option{testguest.CIData(), testguest.Persist("/dev/vdb")}, "virtplane.cidata=1 virtplane.persist=/dev/vdb"},
		{[]testguest.Option{testguest.Hostname("a-b"), testguest.DeviceTimeout(10 * time.Second), testguest.Extra("foo=bar")},
			"virtplane.hostname=a-b virtplane.device_timeout=10 foo=bar"},
		{[]testguest.Option{testguest.Network()}, "virtplane.net=1"},
		{[]testguest.Option{testguest.NetProbe("10.0.2.2:80", "[fec0::2]:80")}, "virtplane.netprobe=10.0.2.2:80,[fec0::2]:80"},
		{[]testguest.Option{testguest.StaticIP(netip.MustParsePrefix("192.0.2.10/24"), netip.MustParseAddr("192.0.2.1"))}, "virtplane.ip=192.0.2.10/24,192.0.2.1"},
		{[]testguest.Option{testguest.StaticIP(netip.MustParsePrefix("fd00::5/64"), netip.Addr{})}, "virtplane.ip=fd00::5/64"},
		{[]testguest.Option{testguest.HTTP(8080), testguest.GuestAgent()}, "virtplane.http=8080 virtplane.ga=1"},
	} {
		got := testguest.Cmdline(tc.opts...)
		if !strings.HasPrefix(got, base) {
			t.Errorf("Cmdline() = %q, want prefix %q", got, base)
		}
		if !strings.HasSuffix(got, tc.want) {
			t.Errorf("Cmdline() = %q, want suffix %q", got, tc.want)
		}
	}
	if got := testguest.Cmdline(testguest.Verbose(), testguest.PanicTimeout(0)); strings.Contains(got, "quiet") || !strings.Contains(got, " panic=0 ") {
		t.Errorf("Verbose, PanicTimeout(0): %q", got)
	}
}

func TestFindMarker(t *testing.T) {
	console := "[    1.0] kernel says hi\r\n" +
		"VIRTPLANE-GUEST-BOOTED hostname=g uptime=3.5\r\n" +
		"VIRTPLANE-PERSIST-PREVIOUS VIRTPLANE-PERSIST boot=4\r\n" +
		"[    2.0] noise VIRTPLANE-GUEST-POWEROFF reason=acpi uptime=9\r\n" +
		"VIRTPLANE-GUEST-CRASHED-NOT\r\n" +
		"VIRTPLANE-GUEST-BOOTED hostname=g uptime=9.9\r\n" +
		"VIRTPLANE-GUEST-WARN" // partial line
	rest, ok := testguest.FindMarker(console, testguest.MarkerBooted)
	if f := testguest.Fields(rest); !ok || f["hostname"] != "g" || f["uptime"] != "3.5" {
		t.Errorf("booted: %q %v", rest, ok)
	}
	if rest, _ := testguest.FindMarker(console, testguest.MarkerPersistPrevious); rest != testguest.PersistLinePrefix+"4" {
		t.Errorf("persist previous: %q", rest)
	}
	if rest, ok := testguest.FindMarker(console, testguest.MarkerPoweroff); !ok || testguest.Fields(rest)["reason"] != "acpi" {
		t.Errorf("poweroff after noise: %q %v", rest, ok)
	}
	if _, ok := testguest.FindMarker(console, testguest.MarkerCrash); ok {
		t.Error("MarkerCrash matched a longer word")
	}
	if _, ok := testguest.FindMarker(console, testguest.MarkerWarning); ok {
		t.Error("MarkerWarning matched a partial word")
	}
	if n := testguest.CountMarker(console, testguest.MarkerBooted); n != 2 {
		t.Errorf("CountMarker = %d, want 2", n)
	}
	// A marker line the guest is still writing does not count yet: its
	// fields would be cut short.
	if rest, ok := testguest.FindMarker("VIRTPLANE-GUEST-BOOTED hostname=g upt", testguest.MarkerBooted); ok {
		t.Errorf("partial line matched: %q", rest)
	}
	if n := testguest.CountMarker(console+"\r\nVIRTPLANE-GUEST-BOOTED host", testguest.MarkerBooted); n != 2 {
		t.Errorf("CountMarker counted a partial line: %d", n)
	}
}

// Ticks reads complete counter lines in order, wherever a line starts
// (a read may begin mid-line), and repeats what the console repeats.
func TestTicks(t *testing.T) {
	console := "CK n=6\r\nVIRTPLANE-TICK n=7\r\n[ 1.2] kernel: x\r\nVIRTPLANE-TICK n=8\nVIRTPLANE-TICK n=8\r\nVIRTPLANE-TICK n=9"
	if got, want := testguest.Ticks(console), []int{7, 8, 8}; !slices.Equal(got, want) {
		t.Fatalf("Ticks = %v, want %v", got, want)
	}
	if got := testguest.Ticks("no counter\n"); got != nil {
		t.Fatalf("Ticks of a console without one = %v", got)
	}
}

// DiskSizes reads the complete size lines of one disk, in order.
func TestDiskSizes(t *testing.T) {
	console := "VIRTPLANE-DISK-SIZE dev=/dev/vda bytes=67108864\r\n" +
		"[ 3.1] virtio_blk virtio2: [vda] new size\r\nVIRTPLANE-DISK-SIZE dev=/dev/vdb bytes=512\r\n" +
		"VIRTPLANE-DISK-SIZE dev=/dev/vda bytes=134217728\n" +
		"VIRTPLANE-DISK-SIZE dev=/dev/vda bytes=2684" // cut short
	if got, want := testguest.DiskSizes(console, "/dev/vda"), []int64{64 << 20, 128 << 20}; !slices.Equal(got, want) {
		t.Fatalf("DiskSizes = %v, want %v", got, want)
	}
	if got := testguest.DiskSizes(console, "/dev/vdc"); len(got) != 0 {
		t.Fatalf("DiskSizes of another disk = %v", got)
	}
}

// BlockDevices follows the disks the guest has as they come and go, by
// serial across a plug, an unplug and a plug again; a line cut short
// counts for nothing.
func TestBlockDevices(t *testing.T) {
	console := "VIRTPLANE-BLOCK-ADD dev=vda serial= bytes=67108864\r\n" +
		"VIRTPLANE-BLOCK-ADD dev=vdb serial=hot bytes=50331648\r\n" +
		"[ 9.2] pcieport 0000:00:02.5: pciehp: Slot(0-5): Attention button pressed\r\n" +
		"VIRTPLANE-BLOCK-REMOVE dev=vdb\r\n" +
		"VIRTPLANE-BLOCK-REMOVE dev=vdz\r\n" + // never added: nothing to remove
		"VIRTPLANE-BLOCK-ADD dev=sda serial=hot bytes=1024\r\n" +
		"VIRTPLANE-BLOCK-ADD dev=sdb serial=cut bytes=5" // cut short
	now, added, removed := testguest.BlockDevices(console)
	want := map[string]testguest.BlockDevice{
		"vda": {Dev: "vda", Bytes: 64 << 20},
		"sda": {Dev: "sda", Serial: "hot", Bytes: 1024},
	}
	if !maps.Equal(now, want) {
		t.Errorf("BlockDevices now = %v, want %v", now, want)
	}
	if added["hot"] != 2 || removed["hot"] != 1 || added["cut"] != 0 || len(removed) != 1 {
		t.Errorf("BlockDevices added = %v, removed = %v, want hot added twice and removed once", added, removed)
	}
	if d, ok := testguest.BlockBySerial(now, "hot"); !ok || d.Dev != "sda" {
		t.Errorf("BlockBySerial(hot) = %v, %v, want sda", d, ok)
	}
	if _, ok := testguest.BlockBySerial(now, "cut"); ok {
		t.Error("BlockBySerial found the disk of a line cut short")
	}
}

func TestBetween(t *testing.T) {
	console := "x\r\nVIRTPLANE-USERDATA-BEGIN\r\n#cloud-config\r\na: 1\r\nVIRTPLANE-USERDATA-END\r\n" +
		"VIRTPLANE-METADATA-BEGIN\r\nVIRTPLANE-METADATA-END\r\n"
	if got, ok := testguest.Between(console, testguest.MarkerUserdataBegin, testguest.MarkerUserdataEnd); !ok || got != "#cloud-config\na: 1\n" {
		t.Errorf("user-data %q %v", got, ok)
	}
	if got, ok := testguest.Between(console, testguest.MarkerMetadataBegin, testguest.MarkerMetadataEnd); !ok || got != "" {
		t.Errorf("empty meta-data %q %v", got, ok)
	}
	if _, ok := testguest.Between("VIRTPLANE-USERDATA-BEGIN\nhalf", testguest.MarkerUserdataBegin, testguest.MarkerUserdataEnd); ok {
		t.Error("incomplete block reported complete")
	}
}

// TestInitScript checks that /init prints every marker this package names
// and is valid POSIX sh (busybox ash runs it; dash parses the same).
func TestInitScript(t *testing.T) {
	for _, m := range []string{
		testguest.MarkerBooted, testguest.MarkerPoweroff, testguest.MarkerCrash, testguest.MarkerWarning,
		testguest.MarkerUserdataBegin, testguest.MarkerUserdataEnd, testguest.MarkerMetadataBegin, testguest.MarkerMetadataEnd,
		testguest.MarkerPersistPrevious, testguest.MarkerPersistWrote, testguest.PersistLinePrefix,
		testguest.MarkerNetUp, testguest.MarkerNetProbe, testguest.MarkerNetProbeDone, testguest.MarkerCloudInitUser,
		testguest.MarkerTick, testguest.MarkerHTTPUp, testguest.MarkerGuestAgentUp, testguest.MarkerDiskSize,
	} {
		if !strings.Contains(testguest.InitScript, m) {
			t.Errorf("init.sh never prints %s", m)
		}
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	if !strings.Contains(testguest.InitScript, testguest.GuestAgentPath) {
		t.Errorf("init.sh never runs %s", testguest.GuestAgentPath)
	}
	for name, script := range map[string]string{"init.sh": testguest.InitScript, "ga.sh": testguest.GuestAgentScript} {
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(sh, "-n", path).CombinedOutput(); err != nil {
			t.Errorf("sh -n %s: %v\n%s", name, err, out)
		}
	}
}

func TestNetProbes(t *testing.T) {
	console := "VIRTPLANE-NET-UP iface=eth0 ip=10.0.2.15/24 router=10.0.2.2 dns=10.0.2.3\r\n" +
		"VIRTPLANE-NETPROBE target=10.0.2.2:80 result=reached body=hello\r\n" +
		"VIRTPLANE-NETPROBE target=[fec0::2]:80 result=blocked error=wget:_can_t_connect\r\n" +
		"VIRTPLANE-NETPROBE target=127.0.0.1:80 result=bloc" // still being written
	got, done := testguest.NetProbes(console)
	want := map[string]testguest.ProbeResult{
		"10.0.2.2:80":  {Target: "10.0.2.2:80", Reached: true, Body: "hello"},
		"[fec0::2]:80": {Target: "[fec0::2]:80", Error: "wget:_can_t_connect"},
	}
	if done || !maps.Equal(got, want) {
		t.Errorf("NetProbes = %v, %v; want %v, false", got, done, want)
	}
	got, done = testguest.NetProbes(console + "cked error=x\r\nVIRTPLANE-NETPROBE-DONE count=3\r\n")
	if !done || len(got) != 3 || got["127.0.0.1:80"].Reached {
		t.Errorf("after the last probe: %v, %v", got, done)
	}
}

func TestDir(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(testguest.EnvDir, "")
	if _, err := testguest.Dir(); err == nil {
		t.Error("Dir() with the variable unset succeeded")
	}
	t.Setenv(testguest.EnvDir, dir)
	if _, err := testguest.Dir(); err == nil {
		t.Error("Dir() of an empty directory succeeded")
	}
	for _, f := range []string{testguest.KernelFile, testguest.InitrdFile} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := testguest.Dir()
	if err != nil || got != dir {
		t.Fatalf("Dir() = %q, %v", got, err)
	}
	if k := testguest.Kernel(got); k != filepath.Join(dir, testguest.KernelFile) {
		t.Errorf("Kernel without vmlinux = %s", k)
	}
	if err := os.WriteFile(filepath.Join(dir, testguest.ELFKernelFile), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if k := testguest.Kernel(got); k != filepath.Join(dir, testguest.ELFKernelFile) {
		t.Errorf("Kernel with vmlinux = %s", k)
	}
}
