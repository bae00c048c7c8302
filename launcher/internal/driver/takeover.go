package driver

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"syscall"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/termraw"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
)

// Taking over a domain virtplane did not define (docs/adopt.md): the
// node agent mapped it and the control plane made a VM of it; the first
// Sync of that VM's first instance names the domain's UUID
// (SyncOptions.adopt). The domain is this VMI's from the moment its
// metadata says so, which the take-over writes into its live and
// persistent definitions: everything after (events, status, shutdown,
// kill, undefine, a launcher or agent restart) is the path of any
// domain virtplane defined. QEMU is not touched.

// PersistentDomain is a domain that can tell whether it is defined
// (virsh define) or transient (virsh create). launcher/internal/virt
// implements it.
type PersistentDomain interface {
	IsPersistent() (bool, error)
}

// StatefulDomain tells what libvirt keeps of a domain beside its
// definition (snapshots, checkpoints, a managed save image), for the
// node agent's mapping: undefining such a domain is refused.
// launcher/internal/virt implements it.
type StatefulDomain interface {
	SavedState() (snapshots, checkpoints int, managedSave bool, err error)
}

// takeOver writes this VMI's metadata into dom, which has none yet, if
// it is the domain the node agent mapped (a's UUID). A domain that has
// metadata already was taken over (or is virtplane's), and owned
// decides.
func (d *Driver) takeOver(dom Domain, vmi *apiv1.VirtualMachineInstance, opts *launcherpb.SyncOptions, a *launcherpb.AdoptedDomain) error {
	_, has, err := readMetadata(dom)
	if err != nil {
		return grpcError(err)
	}
	if has {
		return nil
	}
	uuid, err := dom.GetUUIDString()
	if err != nil {
		return grpcError(fmt.Errorf("get domain uuid: %w", err))
	}
	if uuid != a.GetUuid() {
		return status.Errorf(codes.FailedPrecondition, "take-over: domain %s is %s, not the adopted domain %s: another domain took its name", d.cfg.DomainName, uuid, a.GetUuid())
	}
	if p, ok := dom.(PersistentDomain); ok {
		persistent, err := p.IsPersistent()
		if err != nil {
			return grpcError(fmt.Errorf("is the domain persistent: %w", err))
		}
		if !persistent {
			return status.Errorf(codes.FailedPrecondition, "take-over: domain %s is transient (virsh create): define it first (virsh dumpxml | virsh define)", d.cfg.DomainName)
		}
	}
	md := domxml.Metadata{
		UID:                vmi.GetMetadata().GetUid(),
		Namespace:          vmi.GetMetadata().GetNamespace(),
		Name:               vmi.GetMetadata().GetName(),
		GracePeriodSeconds: vmi.GetSpec().GracePeriodSeconds(),
		NodeFailurePolicy:  opts.GetNodeFailurePolicy(),
		Node:               vmi.GetStatus().GetNodeName(),
		Adopted:            true,
	}
	if err := writeMetadata(dom, md); err != nil {
		return grpcError(err)
	}
	d.log.Info("took over a domain defined outside virtplane", "vmi_uid", md.UID, "uuid", uuid, "qemu_pid", d.qemuPid())
	return nil
}

// Console logs are rotated as virtlogd rotates them (its defaults, which
// package console's reader follows): console.log becomes console.log.0,
// .0 becomes .1, up to consoleBackups files.
const (
	consoleMaxSize = 2 << 20
	consoleBackups = 3
)

// consoleCopy copies one QEMU process's serial pty into the console log:
// a domain defined outside virtplane logs nothing itself.
type consoleCopy struct {
	mu   sync.Mutex
	pid  int // the QEMU process copied from; 0: none
	pty  *os.File
	done chan struct{}
}

// copyConsole starts copying dom's serial pty to path for the running
// QEMU process, unless that process's copy runs already. A domain with
// no pty has nothing to copy.
func (d *Driver) copyConsole(dom Domain, path string) {
	pid := d.qemuPid()
	if path == "" || pid == 0 {
		return
	}
	c := &d.console
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pid == pid {
		select {
		case <-c.done:
		default:
			return // copying
		}
	}
	pty := d.consolePty(dom, int32(pid))
	if pty == "" {
		return
	}
	c.stopLocked()
	f, err := termraw.OpenPty(pty, os.O_RDONLY)
	if err != nil {
		d.log.Warn("copying the adopted domain's serial console", "pty", pty, "err", err)
		return
	}
	c.pid, c.pty, c.done = pid, f, make(chan struct{})
	go copyPty(f, &rotatingFile{path: path}, c.done, d.log.With("pty", pty, "console_log", path))
}

// copyPty copies until the pty ends (QEMU exited: EIO) or is closed.
func copyPty(pty *os.File, out *rotatingFile, done chan struct{}, log *slog.Logger) {
	defer close(done)
	defer out.Close()
	_, err := io.Copy(out, pty)
	if err != nil && !errors.Is(err, os.ErrClosed) && !errors.Is(err, syscall.EIO) {
		log.Warn("copying the adopted domain's serial console ended", "err", err)
	}
}

func (c *consoleCopy) stopLocked() {
	if c.pty == nil {
		return
	}
	_ = c.pty.Close() // ends the copy's Read
	<-c.done
	c.pty, c.pid = nil, 0
}

// stop ends the copy; the domain keeps its pty.
func (c *consoleCopy) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopLocked()
}

// rotatingFile appends to path and rotates it at consoleMaxSize.
type rotatingFile struct {
	path string
	f    *os.File
	size int64
}

func (r *rotatingFile) Write(b []byte) (int, error) {
	if r.f != nil && r.size+int64(len(b)) > consoleMaxSize {
		r.f.Close()
		r.f = nil
		for i := consoleBackups - 2; i >= 0; i-- {
			_ = os.Rename(fmt.Sprintf("%s.%d", r.path, i), fmt.Sprintf("%s.%d", r.path, i+1))
		}
		_ = os.Rename(r.path, r.path+".0")
	}
	if r.f == nil {
		f, err := os.OpenFile(r.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return 0, err
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return 0, err
		}
		r.f, r.size = f, fi.Size()
	}
	n, err := r.f.Write(b)
	r.size += int64(n)
	return n, err
}

func (r *rotatingFile) Close() error {
	if r.f == nil {
		return nil
	}
	return r.f.Close()
}
