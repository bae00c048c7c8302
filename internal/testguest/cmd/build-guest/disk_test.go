package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
)

func needDiskTools(t *testing.T) {
	t.Helper()
	for _, tool := range diskTools {
		if _, err := lookTool(tool.cmd); err != nil {
			t.Skipf("%s not installed (Debian package %s; scripts/install-deps.sh test)", tool.cmd, tool.pkg)
		}
	}
	for _, f := range diskFiles {
		if _, err := os.Stat(f.path); err != nil {
			t.Skipf("%s not installed (Debian package %s)", f.path, f.pkg)
		}
	}
}

// TestBuildDisk checks the disk image's layout and that it is the same
// bytes when built again; booting it is TestDiskBoot's (internal/e2e).
func TestBuildDisk(t *testing.T) {
	needDiskTools(t)
	kernel := bytes.Repeat([]byte("kernel"), 100000)
	initrd := []byte("initrd")
	var images [2][]byte
	var raw string
	for i := range images {
		work := t.TempDir()
		img, err := buildDisk(work, kernel, initrd)
		if err != nil {
			t.Fatal(err)
		}
		images[i] = img
		raw = filepath.Join(work, "disk", "disk.raw")
	}
	if !bytes.Equal(images[0], images[1]) {
		t.Error("two builds from the same inputs differ")
	}
	if !bytes.HasPrefix(images[0], []byte("QFI\xfb")) {
		t.Errorf("%s is not qcow2", testguest.DiskFile)
	}

	// The GPT, as sfdisk reads it back.
	out, err := runTool("sfdisk", nil, "--json", raw)
	if err != nil {
		t.Fatal(err)
	}
	var pt struct {
		PartitionTable struct {
			Label      string `json:"label"`
			Partitions []struct {
				Start int    `json:"start"`
				Size  int    `json:"size"`
				Type  string `json:"type"`
			} `json:"partitions"`
		} `json:"partitiontable"`
	}
	if err := json.Unmarshal(out, &pt); err != nil {
		t.Fatal(err)
	}
	parts := pt.PartitionTable.Partitions
	if pt.PartitionTable.Label != "gpt" || len(parts) != 2 ||
		parts[0].Start != biosBootLBA || parts[0].Type != "21686148-6449-6E6F-744E-656564454649" ||
		parts[1].Start != espLBA || parts[1].Type != "C12A7328-F81F-11D2-BA4B-00A0C93EC93B" {
		t.Errorf("partition table %s", out)
	}

	// boot.img points at core.img, and core.img at the rest of itself.
	disk, err := os.ReadFile(raw)
	if err != nil {
		t.Fatal(err)
	}
	boot, err := os.ReadFile("/usr/lib/grub/i386-pc/boot.img")
	if err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint64(disk[bootKernelSector:]); got != biosBootLBA {
		t.Errorf("boot.img kernel sector %d, want %d", got, biosBootLBA)
	}
	if !bytes.Equal(disk[bootDriveCheck+2:bootMBRCodeEnd], boot[bootDriveCheck+2:bootMBRCodeEnd]) || disk[bootDriveCheck] != 0x90 {
		t.Error("MBR code area is not boot.img's")
	}
	if disk[0x1be+4] != 0xee || disk[510] != 0x55 || disk[511] != 0xaa {
		t.Error("protective MBR lost")
	}
	core := disk[biosBootLBA*sectorSize:]
	if got := binary.LittleEndian.Uint64(core[coreBlocklist:]); got != biosBootLBA+1 {
		t.Errorf("core.img blocklist starts at %d, want %d", got, biosBootLBA+1)
	}
	if n := binary.LittleEndian.Uint16(core[coreBlocklist+8:]); n == 0 || !bytes.Equal(core[(1+int(n))*sectorSize:(2+int(n))*sectorSize], make([]byte, sectorSize)) {
		t.Errorf("core.img blocklist length %d does not end where core.img does", n)
	}

	// The ESP: the files, found where the GRUB configs look for them.
	esp := filepath.Join(t.TempDir(), "esp.img")
	if err := os.WriteFile(esp, disk[espLBA*sectorSize:len(disk)-mib], 0o644); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"::/boot/grub/grub.cfg":           "linux /boot/vmlinuz " + testguest.DiskCmdline() + "\n",
		"::/boot/" + testguest.InitrdFile: "initrd",
		"::/EFI/BOOT/BOOTX64.EFI":         "MZ",
		"::/boot/" + testguest.KernelFile: "kernelkernel",
	} {
		got, err := runTool("mtype", nil, "-i", esp, path)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if !strings.Contains(string(got), want) {
			t.Errorf("%s does not hold %q", path, want)
		}
	}
	if label, err := runTool("mlabel", nil, "-s", "-i", esp, "::"); err != nil || !strings.Contains(string(label), espLabel) {
		t.Errorf("ESP label %q, %v; want %s", label, err, espLabel)
	}
	if _, err := exec.LookPath("fsck.fat"); err == nil {
		if out, err := exec.Command("fsck.fat", "-n", esp).CombinedOutput(); err != nil {
			t.Errorf("fsck.fat: %v\n%s", err, out)
		}
	}
}
