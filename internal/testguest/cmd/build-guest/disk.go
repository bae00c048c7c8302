package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
)

// The disk image (testguest.DiskFile) is laid out as cloud images are,
// so that SeaBIOS and OVMF both boot it from a virtio disk:
//
//	LBA 0            protective MBR carrying GRUB's boot.img
//	LBA 1-33         GPT
//	1 MiB  (p1)      BIOS boot partition: GRUB's i386-pc core.img
//	2 MiB  (p2)      EFI system partition, FAT16 labelled espLabel:
//	                   EFI/BOOT/BOOTX64.EFI  GRUB x86_64-efi
//	                   boot/grub/grub.cfg    the menu both GRUBs read
//	                   boot/vmlinuz, boot/initrd.img
//
// Both GRUB images carry the modules they need and an early config that
// finds the ESP by its label, so neither depends on how the firmware
// numbers the disks. Everything is written into files (sfdisk on an
// image file, mkfs.fat and mtools' mcopy on the partition image, boot
// sectors patched here): no loop devices, no mounts, no root needed.
const (
	espLabel = "VPGUEST"
	// espVolumeID is the FAT serial number: fixed, so that the same
	// inputs give the same bytes (mkfs.fat would take it from the clock).
	espVolumeID = "56504755"
	sectorSize  = 512
	mib         = 1 << 20
	biosBootLBA = 1 * mib / sectorSize
	espLBA      = 2 * mib / sectorSize
	// diskGUIDPrefix makes the GPT's GUIDs: fixed for reproducible bytes;
	// nothing identifies the disk by them (GRUB searches the FAT label).
	diskGUIDPrefix = "5650504C-414E-4500-8000-00000000000"
)

// sourceDate is the modification time of every file on the ESP.
var sourceDate = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)

// grubModules are what both GRUB images need: GPT, FAT, finding the ESP
// by label, the menu, Linux, and a serial terminal.
var grubModules = []string{
	"part_gpt", "fat", "search", "search_label", "normal", "configfile",
	"linux", "echo", "test", "serial", "terminal",
}

// GRUB's i386-pc boot sector layout (grub-core's include/grub/i386/pc/boot.h).
const (
	bootBPBStart     = 0x03  // a FAT BPB, copied from the disk
	bootBPBEnd       = 0x5a  //
	bootKernelSector = 0x5c  // LBA of core.img's first sector, 8 bytes
	bootDrive        = 0x64  // 0xff: the drive the BIOS booted from
	bootDriveCheck   = 0x66  // a 2-byte jump that trusts the BIOS's drive number
	bootMBRCodeEnd   = 0x1b8 // disk signature and partition table follow
	// The blocklist at the end of core.img's first sector (diskboot.img):
	// start LBA (8 bytes), sector count (2), load segment (2).
	coreBlocklist = sectorSize - 12
)

// earlyConfig runs inside both GRUB images before their normal mode
// reads $prefix/grub.cfg.
const earlyConfig = "search --no-floppy --label --set=root " + espLabel + "\nset prefix=($root)/boot/grub\n"

// grubConfig is the menu: boot the test guest at once, GRUB's own output
// on the serial port too so a failed boot shows in the console log.
func grubConfig() string {
	return "serial --unit=0 --speed=115200\n" +
		"terminal_input serial console\n" +
		"terminal_output serial console\n" +
		"set timeout=0\n" +
		"menuentry 'virtplane test guest' {\n" +
		"\tlinux /boot/" + testguest.KernelFile + " " + testguest.DiskCmdline() + "\n" +
		"\tinitrd /boot/" + testguest.InitrdFile + "\n" +
		"}\n"
}

// diskTools are the host commands and files the disk image is made with,
// with the Debian package of each; their versions are part of the input
// key (hostToolVersions).
var diskTools = []struct{ cmd, pkg string }{
	{"grub-mkimage", "grub-common"},
	{"mkfs.fat", "dosfstools"},
	{"mcopy", "mtools"},
	{"sfdisk", "fdisk"},
	{"qemu-img", "qemu-utils"},
}

var diskFiles = []struct{ path, pkg string }{
	{"/usr/lib/grub/i386-pc/boot.img", "grub-pc-bin"},
	{"/usr/lib/grub/x86_64-efi/linux.mod", "grub-efi-amd64-bin"},
}

// buildDisk returns the qcow2 disk image holding kernel and initrd, made
// in work (a scratch directory).
func buildDisk(work string, kernel, initrd []byte) ([]byte, error) {
	dir := filepath.Join(work, "disk")
	esp := filepath.Join(dir, "esp")
	for _, d := range []string{"EFI/BOOT", "boot/grub"} {
		if err := os.MkdirAll(filepath.Join(esp, d), 0o755); err != nil {
			return nil, err
		}
	}
	early := filepath.Join(dir, "early.cfg")
	if err := os.WriteFile(early, []byte(earlyConfig), 0o644); err != nil {
		return nil, err
	}
	core := filepath.Join(dir, "core.img")
	if _, err := grubMkimage("i386-pc", early, core, "biosdisk"); err != nil {
		return nil, err
	}
	// efi_gop: Linux gets a framebuffer mode from GRUB, which otherwise
	// complains that it found none.
	if _, err := grubMkimage("x86_64-efi", early, filepath.Join(esp, "EFI/BOOT/BOOTX64.EFI"), "efi_gop"); err != nil {
		return nil, err
	}
	for name, data := range map[string][]byte{
		"boot/" + testguest.KernelFile: kernel,
		"boot/" + testguest.InitrdFile: initrd,
		"boot/grub/grub.cfg":           []byte(grubConfig()),
	} {
		if err := os.WriteFile(filepath.Join(esp, name), data, 0o644); err != nil {
			return nil, err
		}
	}
	// mcopy -m keeps these times (and directories' times) on the FAT.
	if err := filepath.Walk(esp, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Chtimes(p, sourceDate, sourceDate)
	}); err != nil {
		return nil, err
	}

	espBytes, err := dirSize(esp)
	if err != nil {
		return nil, err
	}
	// FAT16 with room to spare; 32 MiB at least, since mkfs.fat makes
	// FAT12 below about 16 MiB.
	espSize := max(32*mib, (espBytes*5/4+mib)/mib*mib+mib)
	espImg := filepath.Join(dir, "esp.img")
	if err := makeFile(espImg, espSize); err != nil {
		return nil, err
	}
	if _, err := runTool("mkfs.fat", nil, "--invariant", "-i", espVolumeID, "-n", espLabel, "-F", "16", espImg); err != nil {
		return nil, err
	}
	if _, err := runTool("mcopy", nil, "-s", "-m", "-i", espImg, filepath.Join(esp, "EFI"), filepath.Join(esp, "boot"), "::/"); err != nil {
		return nil, err
	}

	raw := filepath.Join(dir, "disk.raw")
	diskSize := espLBA*sectorSize + espSize + mib // the backup GPT at the end
	if err := makeFile(raw, diskSize); err != nil {
		return nil, err
	}
	table := fmt.Sprintf("label: gpt\nlabel-id: %s1\nfirst-lba: 2048\n"+
		"start=%d, size=%d, type=21686148-6449-6E6F-744E-656564454649, uuid=%s2, name=\"bios\"\n"+
		"start=%d, size=%d, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, uuid=%s3, name=\"esp\"\n",
		diskGUIDPrefix, biosBootLBA, espLBA-biosBootLBA, diskGUIDPrefix, espLBA, espSize/sectorSize, diskGUIDPrefix)
	if _, err := runTool("sfdisk", strings.NewReader(table), "--no-reread", "--no-tell-kernel", "-q", raw); err != nil {
		return nil, err
	}
	if err := writeBIOSBoot(raw, core); err != nil {
		return nil, err
	}
	if err := copyInto(raw, espImg, espLBA*sectorSize); err != nil {
		return nil, err
	}
	qcow := filepath.Join(dir, testguest.DiskFile)
	if _, err := runTool("qemu-img", nil, "convert", "-f", "raw", "-O", "qcow2", raw, qcow); err != nil {
		return nil, err
	}
	return os.ReadFile(qcow)
}

func grubMkimage(format, early, out string, extra ...string) ([]byte, error) {
	args := []string{"-O", format, "-d", filepath.Join("/usr/lib/grub", format), "-o", out, "-c", early, "-p", "/boot/grub"}
	args = append(args, extra...)
	return runTool("grub-mkimage", nil, append(args, grubModules...)...)
}

// writeBIOSBoot does what grub-bios-setup does for a GPT disk with a BIOS
// boot partition (grub-bios-setup ships only in grub-pc, which would
// take over the host's boot loader): boot.img goes into the MBR's code
// area, pointing at core.img's first sector, and core.img goes into the
// BIOS boot partition with its blocklist pointing at the rest of itself.
func writeBIOSBoot(raw, coreImg string) error {
	boot, err := os.ReadFile("/usr/lib/grub/i386-pc/boot.img")
	if err != nil {
		return err
	}
	if len(boot) != sectorSize {
		return fmt.Errorf("boot.img has %d bytes, want %d", len(boot), sectorSize)
	}
	core, err := os.ReadFile(coreImg)
	if err != nil {
		return err
	}
	sectors := (len(core) + sectorSize - 1) / sectorSize
	if sectors < 2 || sectors > espLBA-biosBootLBA {
		return fmt.Errorf("core.img has %d sectors; the BIOS boot partition holds %d", sectors, espLBA-biosBootLBA)
	}
	core = append(core, make([]byte, sectors*sectorSize-len(core))...)
	// diskboot.img loads the rest in one run of sectors to its segment.
	binary.LittleEndian.PutUint64(core[coreBlocklist:], biosBootLBA+1)
	binary.LittleEndian.PutUint16(core[coreBlocklist+8:], uint16(sectors-1))

	f, err := os.OpenFile(raw, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	mbr := make([]byte, sectorSize)
	if _, err := f.ReadAt(mbr, 0); err != nil {
		return err
	}
	if mbr[510] != 0x55 || mbr[511] != 0xaa || mbr[0x1be+4] != 0xee {
		return errors.New("sfdisk left no protective MBR")
	}
	copy(boot[bootBPBStart:bootBPBEnd], mbr[bootBPBStart:bootBPBEnd])
	binary.LittleEndian.PutUint64(boot[bootKernelSector:], biosBootLBA)
	boot[bootDrive] = 0xff
	// A hard disk: trust the drive number the BIOS passes (grub-bios-setup
	// nops the check out the same way).
	boot[bootDriveCheck], boot[bootDriveCheck+1] = 0x90, 0x90
	copy(mbr[:bootMBRCodeEnd], boot[:bootMBRCodeEnd])
	if _, err := f.WriteAt(mbr, 0); err != nil {
		return err
	}
	if _, err := f.WriteAt(core, biosBootLBA*sectorSize); err != nil {
		return err
	}
	return f.Close()
}

func makeFile(path string, size int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := f.Truncate(int64(size)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func copyInto(dst, src string, off int) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(data, int64(off)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func dirSize(dir string) (int, error) {
	n := 0
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			n += int(fi.Size())
		}
		return nil
	})
	return n, err
}

// lookTool finds a host command, also in the sbin directories a non-root
// PATH may lack (mkfs.fat, sfdisk).
func lookTool(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/sbin"} {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found", name)
}

// runTool runs a disk tool with an argument list and optional stdin, in
// UTC (mtools turns file times into FAT local times) and without mtools'
// geometry check, which a partition image fails.
func runTool(name string, stdin *strings.Reader, args ...string) ([]byte, error) {
	path, err := lookTool(name)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC", "MTOOLS_SKIP_CHECK=1")
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// hostToolVersions names the installed versions of the disk tools'
// packages, for the input key: a new GRUB makes a new image.
func hostToolVersions() (string, error) {
	pkgs := []string{}
	for _, t := range diskTools {
		pkgs = append(pkgs, t.pkg)
	}
	for _, f := range diskFiles {
		pkgs = append(pkgs, f.pkg)
	}
	out, err := run("", "dpkg-query", append([]string{"-W", "-f", "${Package} ${Version}\n"}, pkgs...)...)
	if err != nil {
		return "", fmt.Errorf("versions of the disk tools: %w", err)
	}
	return string(out), nil
}
