package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
)

// What QEMU needs of an rbd class on this node, besides its key (a libvirt
// secret): a ceph.conf that bounds its waits for monitors, and, on a
// hyperconverged host (the class's monitors or OSDs listen on addresses
// of the namespace QEMU runs in), an exception in the guest firewall for
// exactly those endpoints, since the firewall refuses QEMU's user every
// connection to the host's own addresses (docs/storage.md).

// Firewall is where the room puts the storage endpoints QEMU may reach
// on this host (package guestnet's Firewall).
type Firewall interface {
	SetStorageEndpoints(ctx context.Context, eps []netip.AddrPort) error
}

// DefaultEndpointsInterval is how often the endpoints of the classes with
// local ones are read again: an OSD that restarted on other ports is
// unreachable to this host's QEMUs until then (their I/O waits; it never
// fails: docs/notes/storage-probes.md).
const DefaultEndpointsInterval = 10 * time.Second

// ConfFile is where rbd class name's ceph.conf for QEMU is in dir.
func ConfFile(dir, name string) (string, error) {
	return nodedir.FileIn(dir, "virtplane-"+name+".conf")
}

// writeConf writes c's ceph.conf for QEMU (ceph.QEMUConf, no secret),
// readable by QEMU's user, unless it is there already.
func (cs *Classes) writeConf(c *Class) error {
	dir := cs.opts.ConfDir
	if dir == "" {
		return nil // no QEMU reads one (tests of other parts)
	}
	path, err := ConfFile(dir, c.Name)
	if err != nil {
		return err
	}
	c.ConfFile = path
	want := ceph.QEMUConf()
	if have, err := os.ReadFile(path); err == nil && bytes.Equal(have, want) {
		if fi, err := os.Stat(path); err == nil && fi.Mode().Perm() == 0o644 {
			return nil
		}
	}
	if err := nodedir.MkdirTraversable(dir); err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(path, want, 0o644)
}

// removeConf removes the ceph.conf of a class gone from the node.
func (cs *Classes) removeConf(name string) {
	if cs.opts.ConfDir == "" {
		return
	}
	if path, err := ConfFile(cs.opts.ConfDir, name); err == nil {
		_ = os.Remove(path)
	}
}

// readEndpoints reads c's endpoints from its cluster's maps and says
// whether any is local to the namespace QEMU runs in. Without the maps
// (a user whose caps do not allow `mon dump`), the class's own monitors
// are what is known.
func (cs *Classes) readEndpoints(ctx context.Context, c *Class) ([]netip.AddrPort, bool) {
	eps, err := c.Conn.Endpoints(ctx)
	if err != nil {
		cs.log.Warn("reading the storage class's monitor and OSD addresses; its monitors alone are let through the guest firewall", "class", c.Name, "err", err)
		for _, m := range c.RBD().GetMonitors() {
			if ap, err := netip.ParseAddrPort(m); err == nil {
				eps = append(eps, ap)
			}
		}
		eps = ceph.SortEndpoints(eps)
	}
	addrs := make([]netip.Addr, 0, len(eps))
	for _, ep := range eps {
		addrs = append(addrs, ep.Addr())
	}
	local, err := anyLocal(c.Conn.NetNS, addrs)
	if err != nil {
		cs.log.Warn("telling whether the storage class's endpoints are this host's", "class", c.Name, "err", err)
	}
	return eps, local
}

// pushEndpoints hands the firewall the endpoints of every class the
// node uses. A class that is not reachable now keeps the endpoints last
// read for it (its guests reconnect when it is back); one whose cluster
// does not require cephx has none.
func (cs *Classes) pushEndpoints(ctx context.Context) {
	if cs.opts.Firewall == nil {
		return
	}
	cs.mu.Lock()
	var eps []netip.AddrPort
	for _, c := range cs.classes {
		eps = append(eps, c.endpoints...)
	}
	cs.mu.Unlock()
	if err := cs.opts.Firewall.SetStorageEndpoints(ctx, ceph.SortEndpoints(eps)); err != nil {
		cs.log.Error("guest firewall: setting the storage endpoints; QEMU may not reach storage on this host", "err", err)
	}
}

// refreshLocal reads again the endpoints of the reachable classes whose
// endpoints are local (class "" for all of them) and pushes them.
func (cs *Classes) refreshLocal(ctx context.Context, class string) {
	cs.mu.Lock()
	var todo []*Class
	for _, c := range cs.classes {
		if c.local && c.Status.GetReady() && c.Conn != nil && (class == "" || c.Name == class) {
			todo = append(todo, c)
		}
	}
	cs.mu.Unlock()
	if len(todo) == 0 {
		return
	}
	for _, c := range todo {
		eps, local := cs.readEndpoints(ctx, c)
		cs.mu.Lock()
		c.endpoints, c.local = eps, local
		cs.mu.Unlock()
	}
	cs.pushEndpoints(ctx)
}

// BeforeStart brings what a start (or an incoming migration) of a domain
// with a volume on rbd class c needs on this node up to date: on a
// hyperconverged host, the guest firewall's exception for the cluster's
// endpoints as they are now (an OSD may have restarted on other ports).
// A failure is logged, not returned: the endpoints last read stay, and a
// start QEMU cannot complete fails on its own bound, with the cause.
func (cs *Classes) BeforeStart(ctx context.Context, c *Class) {
	cs.refreshLocal(ctx, c.Name)
}

// runEndpoints refreshes the local endpoints every interval.
func (cs *Classes) runEndpoints(ctx context.Context) {
	if cs.opts.Firewall == nil {
		return
	}
	t := cs.opts.Clock.NewTicker(cs.opts.EndpointsInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			cs.refreshLocal(ctx, "")
		}
	}
}

// checkCephx refuses a class whose monitors let in a client without
// cephx: every guest reaches the cluster's endpoints (on this host through
// the firewall's exception, on every other host as any address that is
// not the host's own), and then its data.
func checkCephx(ctx context.Context, c *Class) error {
	err := c.Conn.CheckCephx(ctx)
	if errors.Is(err, ceph.ErrNoCephx) {
		return fmt.Errorf("the cluster does not require cephx: %w, so a guest that reaches them (through the guest firewall's "+
			"exception on a host that runs them, as any other address elsewhere) could read and write the pool; refused until "+
			"auth_cluster_required, auth_service_required and auth_client_required are cephx", err)
	}
	return err
}
