package driver

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
)

// fenceKillAfter is how long a self-fence waits for libvirt before it
// kills QEMU itself: a libvirtd that hangs, or is stopped with the rest
// of a cut-off node while QEMU runs on, must not keep a guest alive that
// the control plane is about to start elsewhere. It is well inside the
// server's fence margin (docs/failover.md: the margin covers the kill).
const fenceKillAfter = 5 * time.Second

// fenceKillWait bounds the wait for a killed QEMU to be gone.
const fenceKillWait = 5 * time.Second

// policyCache is the node failure policy the domain's metadata last
// showed: what a self-fence goes by when libvirt does not answer.
type policyCache struct {
	mu    sync.Mutex
	md    domxml.Metadata
	known bool
}

func (p *policyCache) remember(md domxml.Metadata) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.md, p.known = md, true
}

// fencedOnLeaseExpiry is true only for a domain last seen as
// RestartElsewhere: unknown counts as Wait, which is never killed.
func (p *policyCache) fencedOnLeaseExpiry() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.known && p.md.FencedOnLeaseExpiry()
}

// killQEMU kills the domain's QEMU process without libvirt, through a
// pidfd (no pid can be reused between the check and the signal), after
// checking from its command line that it is this domain's QEMU. gone
// reports that no QEMU of the domain runs any more.
func (d *Driver) killQEMU() (gone bool, err error) {
	if !d.policy.fencedOnLeaseExpiry() {
		return false, errors.New("the domain is not known to be RestartElsewhere; only libvirt may decide")
	}
	pid := d.qemuPid()
	if pid <= 0 {
		return true, nil // no pid file: QEMU does not run
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(fd)
	// Checked after the pidfd is open: the pidfd names this process
	// whatever happens to the pid file.
	if !isQEMUOf(pid, d.cfg.DomainName) {
		return true, nil // a stale pid file: the pid is another process
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return false, fmt.Errorf("killing QEMU %d: %w", pid, err)
	}
	// The pidfd turns readable when the process has exited.
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int(fenceKillWait/time.Millisecond))
	if err != nil && !errors.Is(err, unix.EINTR) {
		return false, fmt.Errorf("waiting for QEMU %d: %w", pid, err)
	}
	if n == 0 {
		return false, fmt.Errorf("QEMU %d still runs %s after SIGKILL", pid, fenceKillWait)
	}
	d.log.Error("self-fence: libvirt did not answer; QEMU killed", "pid", pid)
	return true, nil
}

// isQEMUOf reports whether process pid runs the QEMU of domain name:
// libvirt starts it with "-name guest=<name>,...".
func isQEMUOf(pid int, name string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	for _, arg := range bytes.Split(b, []byte{0}) {
		if bytes.HasPrefix(arg, []byte("guest="+name+",")) || bytes.Equal(arg, []byte("guest="+name)) {
			return true
		}
	}
	return false
}
