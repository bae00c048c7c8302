package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest/cpio"
)

func TestParseControl(t *testing.T) {
	in := "Package: linux-image-amd64\nVersion: 6.1.192-2\nDepends: linux-image-6.1.0-56-amd64 (= 6.1.192-2)\n" +
		"Description: Linux for\n 64-bit PCs\n\nPackage: other\nVersion: 1\n"
	f := parseControl([]byte(in))
	if f["Package"] != "linux-image-amd64" || f["Version"] != "6.1.192-2" || f["Description"] != "Linux for\n64-bit PCs" {
		t.Errorf("parseControl = %v", f)
	}
	for _, tc := range []struct{ depends, want string }{
		{f["Depends"], "linux-image-6.1.0-56-amd64"},
		{"kmod, linux-base (>= 4.3~), initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool", ""},
		{"foo | linux-image-6.12.1-amd64:any (= 1)", "linux-image-6.12.1-amd64"},
	} {
		if got := dependsWithPrefix(tc.depends, "linux-image-"); got != tc.want {
			t.Errorf("dependsWithPrefix(%q) = %q, want %q", tc.depends, got, tc.want)
		}
	}
	p := debPackage{Name: "busybox-static", Version: "1:1.35.0-4", Arch: "amd64"}
	if got := p.fileName(); got != "busybox-static_1%3a1.35.0-4_amd64.deb" {
		t.Errorf("fileName = %s", got)
	}
}

func fakeModules() *kernelModules {
	deps := map[string][]string{
		"kernel/sr_mod.ko":       {"scsi_mod", "cdrom", "scsi_common"},
		"kernel/scsi_mod.ko":     {"scsi_common"},
		"kernel/pvpanic-mmio.ko": {"pvpanic"},
	}
	km := &kernelModules{
		dir: "/k",
		paths: map[string]string{
			"sr_mod": "kernel/sr_mod.ko", "scsi_mod": "kernel/scsi_mod.ko", "scsi_common": "kernel/scsi_common.ko",
			"cdrom": "kernel/cdrom.ko", "pvpanic_mmio": "kernel/pvpanic-mmio.ko",
		},
		builtin: map[string]bool{"pvpanic": true},
	}
	km.deps = func(path string) ([]string, error) {
		rel, _ := filepath.Rel(km.dir, path)
		return deps[rel], nil
	}
	return km
}

func TestModuleOrder(t *testing.T) {
	km := fakeModules()
	loaded := map[string]bool{}
	got, err := km.order([]moduleWant{{name: "pvpanic-mmio"}, {name: "sr_mod"}}, loaded)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"kernel/pvpanic-mmio.ko", "kernel/cdrom.ko", "kernel/scsi_common.ko", "kernel/scsi_mod.ko", "kernel/sr_mod.ko"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("order = %v, want %v", got, want)
	}
	// A later group does not load again what an earlier one did.
	again, err := km.order([]moduleWant{{name: "scsi_mod"}}, loaded)
	if err != nil || len(again) != 0 {
		t.Errorf("second group = %v, %v", again, err)
	}
	if _, err := km.order([]moduleWant{{name: "nosuch"}}, map[string]bool{}); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Errorf("missing module: %v", err)
	}
}

// TestOrderGroups: groups after base are loaded on their own flags, so
// each lists what it needs beyond base, even what another group lists.
func TestOrderGroups(t *testing.T) {
	km := fakeModules()
	got, err := orderGroups(km, []moduleGroup{
		{"base", []moduleWant{{name: "scsi_common"}}},
		{"disk", []moduleWant{{name: "sr_mod"}}},
		{"other", []moduleWant{{name: "scsi_mod"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"base":  {"kernel/scsi_common.ko"},
		"disk":  {"kernel/cdrom.ko", "kernel/scsi_mod.ko", "kernel/sr_mod.ko"},
		"other": {"kernel/scsi_mod.ko"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("orderGroups = %v, want %v", got, want)
	}
}

func TestInitramfs(t *testing.T) {
	dir := t.TempDir()
	for _, m := range []string{"a.ko", "b.ko"} {
		if err := os.WriteFile(filepath.Join(dir, m), []byte("module "+m), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	busybox := []byte("\x7fELF\x00" + strings.Join(applets, "\x00") + "\x00")
	in := initramfsInputs{busybox: busybox, modulesDir: dir, groups: map[string][]string{"base": {"b.ko", "a.ko"}, "net": {"a.ko"}}}
	tr, err := buildTree(in)
	if err != nil {
		t.Fatal(err)
	}
	var img1, img2 bytes.Buffer
	if err := writeInitramfs(tr, &img1); err != nil {
		t.Fatal(err)
	}
	tr2, _ := buildTree(in)
	if err := writeInitramfs(tr2, &img2); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(img1.Bytes(), img2.Bytes()) {
		t.Error("initramfs is not reproducible")
	}
	zr, err := gzip.NewReader(&img1)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"init\x00", "dev/console\x00", "bin/sh\x00", "bin/wget\x00", "lib/modules/a.ko\x00",
		"etc/acpi/PWRF/00000080\x00", udhcpcScriptPath + "\x00", "etc/virtplane/modules.net\x00", "TRAILER!!!\x00"} {
		if !bytes.Contains(raw, []byte(want)) {
			t.Errorf("initramfs lacks %q", strings.TrimSuffix(want, "\x00"))
		}
	}
	if !bytes.Contains(raw, []byte("b.ko\na.ko\n")) {
		t.Error("modules.base does not keep the load order")
	}
	// A module two groups share is stored once.
	if n := bytes.Count(raw, []byte("lib/modules/a.ko\x00")); n != 1 {
		t.Errorf("a.ko stored %d times", n)
	}
	if e := tr[udhcpcScriptPath]; e.mode != cpio.TypeReg|0o755 || !strings.Contains(string(e.data), "--virtplane-dhcp") {
		t.Errorf("udhcpc script = %+v", e)
	}
	if !bytes.Contains(raw, []byte(testguest.InitScript)) {
		t.Error("init is not init.sh")
	}
	if e := tr[testguest.GuestAgentPath]; e.mode != cpio.TypeReg|0o755 || string(e.data) != testguest.GuestAgentScript {
		t.Errorf("%s = %+v, want ga.sh", testguest.GuestAgentPath, e)
	}
	if e := tr["dev/console"]; e.mode != cpio.TypeChar|0o600 || e.maj != 5 || e.min != 1 {
		t.Errorf("dev/console = %+v", e)
	}

	in.busybox = []byte("\x00sh\x00")
	if _, err := buildTree(in); err == nil {
		t.Error("busybox without the applets accepted")
	}
}

func TestExtractVmlinuxRejects(t *testing.T) {
	if _, err := extractVmlinux([]byte("not a kernel")); err == nil {
		t.Error("accepted garbage")
	}
}

// TestExtractVmlinuxBuilt checks the real kernel when a built guest is at
// hand: the ELF kernel is the bzImage's payload and boots through PVH.
func TestExtractVmlinuxBuilt(t *testing.T) {
	dir, err := testguest.Dir()
	if err != nil {
		t.Skip(err)
	}
	bz, err := os.ReadFile(filepath.Join(dir, testguest.KernelFile))
	if err != nil {
		t.Fatal(err)
	}
	elfKernel, err := extractVmlinux(bz)
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(dir, testguest.ELFKernelFile))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(elfKernel, want) {
		t.Error("vmlinux differs from the bzImage's payload")
	}
}
