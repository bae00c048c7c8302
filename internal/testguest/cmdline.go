package testguest

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// speedArgs shorten a boot under TCG by about a second, measured: skip
// the crypto self-tests (~0.7 s), TSC and timer checks, auditing, and
// probing serial ports beyond ttyS0. None changes what the guest does.
var speedArgs = []string{"cryptomgr.notests", "tsc=reliable", "no_timer_check", "audit=0", "8250.nr_uarts=1"}

// Option adds to the guest's kernel command line; see Cmdline.
type Option func(*cmdline)

type cmdline struct {
	panicSecs int
	quiet     bool
	flags     []string
	extra     []string
}

// Cmdline returns a kernel command line for the test guest:
// "console=ttyS0 quiet panic=-1", boot speed-ups, then the virtplane.*
// flags the options ask for, in the order given.
//
// panic=-1 (reboot at once) only matters when pvpanic did not stop the
// guest first; domains for tests should set on_reboot=destroy so that such
// a crash ends the domain rather than looping.
func Cmdline(opts ...Option) string {
	c := cmdline{panicSecs: -1, quiet: true}
	for _, o := range opts {
		o(&c)
	}
	args := []string{"console=ttyS0"}
	if c.quiet {
		args = append(args, "quiet")
	}
	args = append(args, fmt.Sprintf("panic=%d", c.panicSecs))
	args = append(args, speedArgs...)
	args = append(args, c.flags...)
	args = append(args, c.extra...)
	return strings.Join(args, " ")
}

// DiskCmdline is the kernel command line of the guest booted from
// DiskFile, as its GRUB menu has it: the guest reads its cloud-init
// NoCloud seed, as a cloud image would.
func DiskCmdline() string { return Cmdline(CIData()) }

// seconds rounds d up to whole seconds, the guest's timer resolution.
func seconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int((d + time.Second - 1) / time.Second)
}

// PoweroffAfter makes the guest power itself off (ACPI, domain shut off
// with reason "shutdown") d after it has booted and handled its disks.
func PoweroffAfter(d time.Duration) Option {
	return func(c *cmdline) {
		c.flags = append(c.flags, fmt.Sprintf("virtplane.poweroff_after=%d", seconds(d)))
	}
}

// Crash makes the guest's kernel panic d after it has booted. With a
// <panic model='isa'/> device and on_crash=destroy the domain shuts off
// with reason "crashed".
func Crash(after time.Duration) Option {
	return func(c *cmdline) {
		c.flags = append(c.flags, "virtplane.crash")
		if s := seconds(after); s > 0 {
			c.flags = append(c.flags, fmt.Sprintf("virtplane.crash_after=%d", s))
		}
	}
}

// CIData makes the guest print user-data and meta-data from the ISO 9660
// disk labelled "cidata" (a CD-ROM on SATA/IDE/SCSI, or a virtio disk).
func CIData() Option {
	return func(c *cmdline) { c.flags = append(c.flags, "virtplane.cidata=1") }
}

// Persist makes the guest read and bump a boot counter kept in the first
// sector of the raw disk dev (e.g. "/dev/vdb").
func Persist(dev string) Option {
	return func(c *cmdline) { c.flags = append(c.flags, "virtplane.persist="+dev) }
}

// PersistEvery makes a Persist guest also write a counter to the disk's
// second sector every d, carrying on from the last boot's, and say of
// each write whether it reached the disk (MarkerPersistWrite,
// MarkerPersistWriteFailed).
func PersistEvery(d time.Duration) Option {
	return func(c *cmdline) {
		c.flags = append(c.flags, fmt.Sprintf("virtplane.persist_every=%d", seconds(d)))
	}
}

// DiskSize makes the guest print the size it sees of the disk dev (e.g.
// "/dev/vda") once it appears, and again whenever it changes (a disk
// grown while the guest runs): MarkerDiskSize lines, which DiskSizes
// reads.
func DiskSize(dev string) Option {
	return func(c *cmdline) { c.flags = append(c.flags, "virtplane.disksize="+dev) }
}

// BlockWatch makes the guest print its disks as they come and go:
// MarkerBlockAdd and MarkerBlockRemove lines, which BlockDevices reads.
func BlockWatch() Option {
	return func(c *cmdline) { c.flags = append(c.flags, "virtplane.blockwatch") }
}

// Hostname sets the guest's hostname, printed in MarkerBooted
// (letters, digits, '.' and '-'; default "virtplane-guest").
func Hostname(name string) Option {
	return func(c *cmdline) { c.flags = append(c.flags, "virtplane.hostname="+name) }
}

// DeviceTimeout bounds how long the guest waits for the cidata and
// persist disks to appear (default 30 s).
func DeviceTimeout(d time.Duration) Option {
	return func(c *cmdline) {
		c.flags = append(c.flags, fmt.Sprintf("virtplane.device_timeout=%d", seconds(d)))
	}
}

// Network brings the guest's first NIC up by DHCP and prints
// MarkerNetUp.
func Network() Option {
	return func(c *cmdline) { c.flags = append(c.flags, "virtplane.net=1") }
}

// NetProbe brings the network up (Network) and then fetches
// http://<target>/ for each target, in order, printing one
// MarkerNetProbe line each and MarkerNetProbeDone after the last. A
// target is an IP literal and a port: "10.0.2.2:8080",
// "[fec0::2]:8080" (net.JoinHostPort). Targets in 127.0.0.0/8 are routed
// out of the NIC rather than to the guest's own loopback, as a hostile
// guest could send them.
func NetProbe(targets ...string) Option {
	return func(c *cmdline) { c.flags = append(c.flags, "virtplane.netprobe="+strings.Join(targets, ",")) }
}

// StaticIP brings the guest's first NIC up with the address addr (e.g.
// 192.0.2.10/24) and, when gateway is valid, a default route through it,
// instead of DHCP, and prints MarkerNetUp as Network does (dns empty).
func StaticIP(addr netip.Prefix, gateway netip.Addr) Option {
	return func(c *cmdline) {
		v := "virtplane.ip=" + addr.String()
		if gateway.IsValid() {
			v += "," + gateway.String()
		}
		c.flags = append(c.flags, v)
	}
}

// HTTP brings the network up (Network, or StaticIP's address) and
// answers HTTP on port, on every address of the guest, with the guest's
// hostname and a newline; MarkerHTTPUp says it listens.
func HTTP(port int) Option {
	return func(c *cmdline) { c.flags = append(c.flags, fmt.Sprintf("virtplane.http=%d", port)) }
}

// GuestAgent runs a QEMU guest agent stand-in on the virtio-serial port
// org.qemu.guest_agent.0 (which virtplane gives every domain): it
// answers libvirt's guest-sync, guest-ping, guest-info and
// guest-network-get-interfaces, so libvirt's agent source reports the
// guest's addresses. MarkerGuestAgentUp says it opened the port.
func GuestAgent() Option {
	return func(c *cmdline) { c.flags = append(c.flags, "virtplane.ga=1") }
}

// PanicTimeout sets the kernel's panic= (seconds before rebooting after a
// panic; 0 waits forever, negative reboots at once).
func PanicTimeout(secs int) Option { return func(c *cmdline) { c.panicSecs = secs } }

// Verbose drops "quiet", so the kernel log shows on the console too.
func Verbose() Option { return func(c *cmdline) { c.quiet = false } }

// Extra appends raw kernel parameters.
func Extra(args ...string) Option { return func(c *cmdline) { c.extra = append(c.extra, args...) } }
