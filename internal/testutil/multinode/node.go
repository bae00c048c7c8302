package multinode

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/proc"
)

// bindMounts are the node's dirs (under Root) and the libvirt dirs they
// cover in its mount namespace: all of libvirt's configuration, state,
// sockets, logs and caches, and nothing else.
var bindMounts = []struct{ sub, target string }{
	{"etc", "/etc/libvirt"},
	{"run", "/run/libvirt"},
	{"lib", "/var/lib/libvirt"},
	{"log", "/var/log/libvirt"},
	{"cache", "/var/cache/libvirt"},
}

// hostCapsCache is the system libvirtd's cache of QEMU's capabilities.
const hostCapsCache = "/var/cache/libvirt/qemu/capabilities"

// pollEvery is how often start checks that a daemon is up.
const pollEvery = 50 * time.Millisecond

// start lays out the node's files and brings up its daemons.
func (n *Node) start(ctx context.Context) error {
	if err := n.prepare(ctx); err != nil {
		return err
	}
	var err error
	// nsenter and unshare exec without forking: the holder's pid is
	// sleep's, in the new namespaces once its name is "sleep".
	n.holder, err = proc.Start(proc.DiesWithParent, "holder", filepath.Join(n.Root, "holder.out"), "nsenter", "--net="+filepath.Join(netnsDir, n.NetNS),
		"--", "unshare", "--mount", "--uts", "--propagation", "private", "--", "sleep", "infinity")
	if err != nil {
		return err
	}
	if err := waitComm(ctx, n.holder, "sleep"); err != nil {
		return err
	}
	if err := n.enterMounts(ctx); err != nil {
		return err
	}
	in := []string{"--target", strconv.Itoa(n.holder.Pid()), "--mount", "--uts", "--net", "--"}
	if n.virtlogd, err = proc.Start(proc.DiesWithParent, "virtlogd", filepath.Join(n.Root, "virtlogd.out"), "nsenter",
		append(in, "virtlogd", "--pid-file", filepath.Join(n.Root, "virtlogd.pid"))...); err != nil {
		return err
	}
	if n.libvirtd, err = proc.Start(proc.DiesWithParent, "libvirtd", filepath.Join(n.Root, "libvirtd.out"), "nsenter",
		append(in, "libvirtd", "--listen", "--pid-file", filepath.Join(n.Root, "libvirtd.pid"))...); err != nil {
		return err
	}
	return n.waitReady(ctx)
}

// waitComm waits until p runs the program named comm (after the execs
// that lead to it).
func waitComm(ctx context.Context, p *proc.Proc, comm string) error {
	return wait.PollUntilContextCancel(ctx, 5*time.Millisecond, true, func(context.Context) (bool, error) {
		if !p.Alive() {
			return false, fmt.Errorf("%s exited: %v: %s", p.Name, p.Wait(), tail(p.Log, 2000))
		}
		return procfs.Comm(p.Pid()) == comm, nil
	})
}

// prepare makes Root's dirs and writes the node's configuration.
func (n *Node) prepare(ctx context.Context) error {
	for _, d := range []string{"", "run", "lib", "lib/images", "lib/qemu", "log", "log/qemu", "cache", "cache/qemu"} {
		p := filepath.Join(n.Root, d)
		if err := os.Mkdir(p, 0o755); err != nil {
			return err
		}
		if err := os.Chmod(p, 0o755); err != nil {
			return err
		}
	}
	u, err := user.Lookup(qemuUser)
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(filepath.Join(n.Root, "lib", "qemu"), uid, gid); err != nil {
		return err
	}
	etc := filepath.Join(n.Root, "etc")
	if err := run1(ctx, "cp", "-a", "/etc/libvirt", etc); err != nil {
		return err
	}
	// The copy holds the system daemon's domains, networks and pools:
	// this node starts empty.
	stale, _ := filepath.Glob(filepath.Join(etc, "qemu", "*.xml"))
	for _, p := range append(stale, filepath.Join(etc, "qemu", "autostart"), filepath.Join(etc, "qemu", "networks"), filepath.Join(etc, "storage")) {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	if _, err := os.Stat(hostCapsCache); err == nil {
		if err := run1(ctx, "cp", "-a", hostCapsCache, filepath.Join(n.Root, "cache", "qemu")); err != nil {
			return err
		}
	}
	lconf, err := libvirtdConf(n.HostUUID, n.Addr, TCPPort)
	if err != nil {
		return err
	}
	qconf, err := qemuConf(n.Addr, n.MigrationPortMin, n.MigrationPortMax)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(etc, "libvirtd.conf"), []byte(lconf), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(etc, "qemu.conf"), []byte(qconf), 0o600)
}

// enterMounts sets up the holder's mount and UTS namespaces: Root's dirs
// over libvirt's, the hostname, and no view of /run/netns (the copy of
// the host's mounts there would hold other runs' namespaces alive).
func (n *Node) enterMounts(ctx context.Context) error {
	pid := strconv.Itoa(n.holder.Pid())
	inMnt := func(args ...string) error {
		return run1(ctx, "nsenter", append([]string{"--target", pid, "--mount", "--"}, args...)...)
	}
	for _, m := range bindMounts {
		if err := os.MkdirAll(m.target, 0o755); err != nil {
			return err
		}
		if err := inMnt("mount", "--bind", filepath.Join(n.Root, m.sub), m.target); err != nil {
			return err
		}
	}
	if mounted, err := isMountPoint(n.holder.Pid(), netnsDir); err != nil {
		return err
	} else if mounted {
		if err := inMnt("umount", "--lazy", netnsDir); err != nil {
			return err
		}
	}
	return run1(ctx, "nsenter", "--target", pid, "--uts", "--", "hostname", n.Name)
}

// isMountPoint reports whether path is a mount point in pid's mount
// namespace (field 5 of /proc/<pid>/mountinfo).
func isMountPoint(pid int, path string) (bool, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		return false, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == path {
			return true, nil
		}
	}
	return false, nil
}

// waitReady waits until virtlogd's socket exists and libvirtd answers on
// the node's URI, failing at once when a daemon exits.
func (n *Node) waitReady(ctx context.Context) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, pollEvery, true, func(ctx context.Context) (bool, error) {
		for _, p := range []*proc.Proc{n.virtlogd, n.libvirtd} {
			if !p.Alive() {
				return false, fmt.Errorf("%s exited: %v; its output: %s; libvirtd log: %s", p.Name, p.Wait(), tail(p.Log, 2000), tail(n.LibvirtdLog(), 2000))
			}
		}
		if _, err := os.Stat(filepath.Join(n.Root, "run", "virtlogd-sock")); err != nil {
			last = err
			return false, nil
		}
		if _, err := os.Stat(n.Socket()); err != nil {
			last = err
			return false, nil
		}
		_, last = n.Virsh(ctx, "version")
		return last == nil, nil
	})
	if err != nil && last != nil && ctx.Err() != nil {
		return fmt.Errorf("waiting for libvirtd on %s: %w (last: %v)", n.URI, err, last)
	}
	return err
}

// stop destroys the node's domains, stops its daemons and kills whatever
// else runs in its network namespace.
func (n *Node) stop() error {
	var errs []error
	if n.libvirtd.Alive() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		errs = append(errs, n.DestroyAll(ctx))
		cancel()
	}
	// libvirtd first: it holds virtlogd's connections.
	for _, p := range []*proc.Proc{n.libvirtd, n.virtlogd, n.holder} {
		errs = append(errs, p.Stop(15*time.Second))
	}
	errs = append(errs, killNetNS(n.NetNS, 15*time.Second))
	return errors.Join(errs...)
}

// PowerOff is the node losing power: libvirtd, virtlogd and every QEMU
// of the node are SIGKILLed at once, so no guest shuts down cleanly and
// nothing answers on URI afterwards. The holder of the node's namespaces
// stays, so that Close tears the node down as usual; DestroyAll does
// nothing from now on. The node agent and launchers are not the node's
// (they run in the host's namespaces): whoever started them stops them
// (internal/testutil/cluster's PowerOff does both).
func (n *Node) PowerOff(d time.Duration) error {
	n.poweredOff.Store(true)
	holder := n.holder.Pid()
	var alive []int
	err := wait.PollUntilContextTimeout(context.Background(), pollEvery, d, true, func(context.Context) (bool, error) {
		alive = alive[:0]
		for _, pid := range pidsInNetNS(n.NetNS) {
			if pid != holder && procfs.Alive(pid) {
				alive = append(alive, pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		return len(alive) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("node %s: processes %v survive SIGKILL: %w", n.Name, alive, err)
	}
	return nil
}

// PoweredOff reports whether PowerOff was called.
func (n *Node) PoweredOff() bool { return n.poweredOff.Load() }

// killNetNS SIGKILLs every process in network namespace name and waits
// until they are gone.
func killNetNS(name string, d time.Duration) error {
	var alive []int
	err := wait.PollUntilContextTimeout(context.Background(), pollEvery, d, true, func(context.Context) (bool, error) {
		alive = alive[:0]
		for _, pid := range pidsInNetNS(name) {
			if procfs.Alive(pid) {
				alive = append(alive, pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		return len(alive) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("processes %v of network namespace %s survive SIGKILL: %w", alive, name, err)
	}
	return nil
}

// dumpLogs logs the end of the node's daemon output and libvirtd log.
func (n *Node) dumpLogs(t Logger) {
	for _, f := range []string{filepath.Join(n.Root, "libvirtd.out"), filepath.Join(n.Root, "virtlogd.out"), n.LibvirtdLog()} {
		if s := tail(f, 8000); s != "" {
			t.Logf("--- node %s: %s (end)\n%s", n.Name, f, s)
		}
	}
}

// tail is the last max bytes of file, "" when unreadable.
func tail(file string, max int) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}
