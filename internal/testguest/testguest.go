// Package testguest describes the tiny Linux guest that tests boot under
// libvirt: where `make guest` put it, the kernel command line that drives
// it, and the marker lines it prints on its serial console.
//
// The guest itself (a Debian kernel and a busybox initramfs) is built by
// ./cmd/build-guest; see README.md for what it does.
package testguest

import (
	_ "embed"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// EnvDir names the directory holding the built guest (`make guest` puts it
// in bin/guest).
const EnvDir = "VIRTPLANE_TEST_GUEST_DIR"

// File names inside the guest directory.
const (
	// KernelFile is Debian's kernel as packaged (a compressed bzImage).
	KernelFile = "vmlinuz"
	// ELFKernelFile is the same kernel uncompressed, which QEMU boots
	// through its PVH entry point: about 5 s faster under TCG, where the
	// kernel's own xz decompressor is slow. Kernel prefers it.
	ELFKernelFile = "vmlinux"
	InitrdFile    = "initrd.img"
	// DiskFile is a bootable qcow2 disk laid out as cloud images are
	// (GPT, GRUB for BIOS and EFI, an EFI system partition holding
	// KernelFile and InitrdFile), booting with DiskCmdline.
	DiskFile = "disk.qcow2"
)

// Marker lines the guest prints on its serial console. Each starts a line;
// what follows a marker is described next to it.
const (
	// MarkerBooted: "hostname=<name> uptime=<seconds> firmware=<bios|efi>".
	// Printed once the guest reacts to the ACPI power button. firmware is
	// efi when the kernel was started by EFI firmware (OVMF).
	MarkerBooted = "VIRTPLANE-GUEST-BOOTED"
	// MarkerPoweroff: "reason=<acpi|timer> uptime=<seconds>", right before
	// the guest powers itself off.
	MarkerPoweroff = "VIRTPLANE-GUEST-POWEROFF"
	// MarkerCrash: "uptime=<seconds>", right before the kernel panics.
	MarkerCrash = "VIRTPLANE-GUEST-CRASH"
	// MarkerWarning: a human-readable problem (bad flag, missing device).
	MarkerWarning = "VIRTPLANE-GUEST-WARNING"
	// MarkerUserdataBegin and MarkerUserdataEnd enclose the cidata
	// user-data file; the Metadata pair encloses meta-data.
	MarkerUserdataBegin = "VIRTPLANE-USERDATA-BEGIN"
	MarkerUserdataEnd   = "VIRTPLANE-USERDATA-END"
	MarkerMetadataBegin = "VIRTPLANE-METADATA-BEGIN"
	MarkerMetadataEnd   = "VIRTPLANE-METADATA-END"
	// MarkerCloudInitUser: "name=<user> uid=1000 home=<dir> keys=<n>
	// key0=<sha256> ...": the first user of a #cloud-config user-data
	// (with CIData), made in the guest with its ssh_authorized_keys in
	// <home>/.ssh/authorized_keys; FindCloudInitUser parses it.
	MarkerCloudInitUser = "VIRTPLANE-GUEST-CLOUDINIT-USER"
	// MarkerPersistPrevious: the line found at the start of the persist
	// disk ("VIRTPLANE-PERSIST boot=<n>"), or "none".
	MarkerPersistPrevious = "VIRTPLANE-PERSIST-PREVIOUS"
	// MarkerPersistWrote: "boot=<n>", n being one more than the previous
	// boot's (1 on a blank disk).
	MarkerPersistWrote = "VIRTPLANE-PERSIST-WROTE"
	// MarkerPersistWritesPrevious: "writes=<k>", the write counter the
	// last boot left in the persist disk's second sector (PersistEvery).
	MarkerPersistWritesPrevious = "VIRTPLANE-PERSIST-WRITES-PREVIOUS"
	// MarkerPersistWrite: "writes=<k>", each write that reached the disk.
	MarkerPersistWrite = "VIRTPLANE-PERSIST-WRITE"
	// MarkerPersistWriteFailed: "writes=<k>", each write that failed
	// (the disk refused it: a storage fence).
	MarkerPersistWriteFailed = "VIRTPLANE-PERSIST-WRITE-FAILED"
	// PersistLinePrefix starts the line the guest keeps on the persist
	// disk.
	PersistLinePrefix = "VIRTPLANE-PERSIST boot="
	// MarkerNetUp: "iface=<name> ip=<addr/prefix> router=<addr>
	// dns=<addr,...>", once DHCP (Network, NetProbe) or StaticIP
	// configured the first NIC (router and dns may then be empty).
	MarkerNetUp = "VIRTPLANE-NET-UP"
	// MarkerHTTPUp: "port=<n>", once the guest answers HTTP there (HTTP).
	MarkerHTTPUp = "VIRTPLANE-HTTP-UP"
	// MarkerGuestAgentUp: "port=/dev/<vport>", once the guest agent
	// stand-in opened its virtio-serial port (GuestAgent).
	MarkerGuestAgentUp = "VIRTPLANE-GA-UP"
	// MarkerGuestAgentFreeze: "state=frozen" or "state=thawed", each
	// time the guest agent stand-in is asked to freeze or thaw the file
	// systems (guest-fsfreeze-freeze, guest-fsfreeze-thaw).
	MarkerGuestAgentFreeze = "VIRTPLANE-GA-FSFREEZE"
	// MarkerNetProbe: "target=<host:port> result=reached body=<first
	// line>" or "target=<host:port> result=blocked error=<wget's
	// message>", one line per NetProbe target, in order; NetProbes
	// parses them.
	MarkerNetProbe = "VIRTPLANE-NETPROBE"
	// MarkerNetProbeDone: "count=<n>", after the last probe.
	MarkerNetProbeDone = "VIRTPLANE-NETPROBE-DONE"
	// MarkerTick: "n=<counter>" every 100 ms with virtplane.tick; Ticks
	// parses them.
	MarkerTick = "VIRTPLANE-TICK"
	// MarkerDiskSize: "dev=<device> bytes=<size>", the size the guest
	// sees of the DiskSize disk, once it is there and again each time it
	// changes; DiskSizes parses them.
	MarkerDiskSize = "VIRTPLANE-DISK-SIZE"
	// MarkerBlockAdd: "dev=<name> serial=<serial> bytes=<size>", a disk
	// (vd*, sd*) the guest has, at boot or plugged in later; and
	// MarkerBlockRemove: "dev=<name>", one that left (BlockWatch).
	MarkerBlockAdd    = "VIRTPLANE-BLOCK-ADD"
	MarkerBlockRemove = "VIRTPLANE-BLOCK-REMOVE"
)

// InitScript is the guest's /init. The builder copies it into the
// initramfs; it lives here so that the markers above and the script that
// prints them are checked together.
//
//go:embed init.sh
var InitScript string

// GuestAgentScript is the guest agent stand-in /init starts with
// virtplane.ga (GuestAgentPath in the guest).
//
//go:embed ga.sh
var GuestAgentScript string

// GuestAgentPath is where the builder puts GuestAgentScript in the
// initramfs (init.sh runs it from there).
const GuestAgentPath = "etc/virtplane/ga.sh"

// Dir returns the directory of the built guest, from $VIRTPLANE_TEST_GUEST_DIR,
// after checking that it holds the kernel and the initramfs.
func Dir() (string, error) {
	dir := os.Getenv(EnvDir)
	if dir == "" {
		return "", fmt.Errorf("%s is not set: run `make guest` and point it at bin/guest", EnvDir)
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("%s: %w", EnvDir, err)
	}
	for _, f := range []string{KernelFile, InitrdFile} {
		fi, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			return "", fmt.Errorf("test guest in %s (from %s): %w; run `make guest`", dir, EnvDir, err)
		}
		if !fi.Mode().IsRegular() || fi.Size() == 0 {
			return "", fmt.Errorf("test guest: %s is not a non-empty file; run `make guest`", filepath.Join(dir, f))
		}
	}
	return dir, nil
}

// Kernel returns the kernel to boot from dir (<os><kernel>): the
// uncompressed ELFKernelFile when the build made one, else KernelFile.
func Kernel(dir string) string {
	if fi, err := os.Stat(filepath.Join(dir, ELFKernelFile)); err == nil && fi.Mode().IsRegular() {
		return filepath.Join(dir, ELFKernelFile)
	}
	return filepath.Join(dir, KernelFile)
}

// Initrd returns the initramfs path in dir (<os><initrd>).
func Initrd(dir string) string { return filepath.Join(dir, InitrdFile) }

// Install copies the guest's kernel (the uncompressed one when the build
// made it: it boots about 5 s faster under TCG) and initrd from dir into
// imageDir, mode 0644, and returns the kernel's file name. Copied, not
// linked: libvirt relabels the files it boots from, and dir is shared by
// other tests running meanwhile.
func Install(dir, imageDir string) (kernel string, err error) {
	k := Kernel(dir)
	for _, src := range []string{k, Initrd(dir)} {
		if err := copyFile(src, filepath.Join(imageDir, filepath.Base(src))); err != nil {
			return "", fmt.Errorf("installing the test guest: %w", err)
		}
	}
	return filepath.Base(k), nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copying %s: %w", src, err)
	}
	return out.Close()
}
