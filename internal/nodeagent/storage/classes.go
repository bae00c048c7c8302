// Package storage is the node agent's storage room: the storage classes
// that select this node (docs/storage.md), with their keys kept as files
// only root reads, whether the node reaches each one (Node status.storage,
// sent with heartbeats), and the volumes on them: RBD images imported
// once per pool and cloned per volume, and the directories of a shared
// filesystem. Files of local volumes are package disks'.
package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/reported"
)

// API is what the room needs of the StorageClasses service.
type API interface {
	List(ctx context.Context, in *apiv1.ListStorageClassesRequest, opts ...grpc.CallOption) (*apiv1.ListStorageClassesResponse, error)
	Watch(ctx context.Context, in *apiv1.WatchStorageClassesRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[apiv1.StorageClassEvent], error)
	Connect(ctx context.Context, in *apiv1.ConnectStorageClassRequest, opts ...grpc.CallOption) (*apiv1.StorageClassConnection, error)
}

// Options configure Classes.
type Options struct {
	API API
	// Dir holds a directory per class with its key file (made 0700).
	Dir string
	// NetNS is the network namespace the node's QEMUs connect from (its
	// libvirtd's, package hostns), where the CLIs run too; "" is the
	// agent's own.
	NetNS func() string
	// Interval is how often classes are listed and probed again
	// (default 30 s); a class update is seen within it.
	Interval time.Duration
	// ConfDir holds each rbd class's ceph.conf for QEMU (ConfFile), which
	// QEMU's user must read; "" writes none.
	ConfDir string
	// Firewall gets the endpoints of the classes' clusters, which QEMU
	// must reach where they are this host's own addresses; nil when no
	// guest firewall runs.
	Firewall Firewall
	// EndpointsInterval is how often the endpoints of classes with local
	// ones are read again; default DefaultEndpointsInterval.
	EndpointsInterval time.Duration
	// Runner runs the Ceph CLIs; nil execs them.
	Runner ceph.Runner
	Clock  clock.WithTicker
	Logger *slog.Logger
}

// Class is one storage class as this node uses it.
type Class struct {
	Name string
	// Spec is the class with its key; never logged.
	Spec *apiv1.StorageClass
	// Conn reaches an rbd class's pool (nil for a shared filesystem).
	Conn *ceph.Conn
	// Status is what the node reports of it.
	Status *apiv1.NodeStorage
	// ConfFile is an rbd class's ceph.conf for QEMU, "" for none.
	ConfFile string

	// endpoints are an rbd class's monitor and OSD addresses, local
	// says some are this host's; guarded by the room's mu once the class
	// is the room's.
	endpoints []netip.AddrPort
	local     bool
	// refused: its cluster lets clients in without cephx.
	refused bool
	// probedAt is when it was last probed.
	probedAt time.Time
}

// RBD is the class's rbd part, or nil.
func (c *Class) RBD() *apiv1.RBDStorage { return c.Spec.GetSpec().GetRbd() }

// SharedPath is a shared filesystem class's mount path, or "".
func (c *Class) SharedPath() string { return c.Spec.GetSpec().GetSharedFilesystem().GetPath() }

// Classes keeps the classes that select the node.
type Classes struct {
	opts   Options
	log    *slog.Logger
	report *reported.Latest[*apiv1.NodeStorageList]
	wake   chan struct{}

	// syncMu makes Syncs (the interval's, a lookup's) one at a time: a
	// slow one finishing after a later one would put back the classes it
	// listed, removing the key files of those made meanwhile.
	syncMu sync.Mutex

	mu      sync.Mutex
	classes map[string]*Class
}

// New returns the room; Run keeps it current.
func New(opts Options) *Classes {
	if opts.Interval <= 0 {
		opts.Interval = 30 * time.Second
	}
	if opts.EndpointsInterval <= 0 {
		opts.EndpointsInterval = DefaultEndpointsInterval
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.NetNS == nil {
		opts.NetNS = func() string { return "" }
	}
	return &Classes{opts: opts, log: opts.Logger, report: reported.New[*apiv1.NodeStorageList](), wake: make(chan struct{}, 1), classes: map[string]*Class{}}
}

// Report is the node's view of its classes, for heartbeats.
func (cs *Classes) Report() *reported.Latest[*apiv1.NodeStorageList] { return cs.report }

// Lookup returns a class the node uses. An error says why it cannot be
// used here (not selecting the node, not reachable), for the VMI to show.
func (cs *Classes) Lookup(ctx context.Context, name string) (*Class, error) {
	cs.mu.Lock()
	c, ok := cs.classes[name]
	cs.mu.Unlock()
	if !ok {
		// A class made moments ago: look once more before refusing.
		cs.Sync(ctx)
		cs.mu.Lock()
		c, ok = cs.classes[name]
		cs.mu.Unlock()
	}
	switch {
	case !ok:
		return nil, fmt.Errorf("storage class %q does not exist or does not select this node", name)
	case !c.Status.GetReady():
		return nil, fmt.Errorf("storage class %q is not reachable from this node: %s", name, c.Status.GetMessage())
	}
	return c, nil
}

// Poke asks for a listing soon (a class event).
func (cs *Classes) Poke() {
	select {
	case cs.wake <- struct{}{}:
	default:
	}
}

// Run lists and probes the classes every interval, and at once when a
// class changes (a watch pokes it).
func (cs *Classes) Run(ctx context.Context) {
	go cs.watch(ctx)
	go cs.runEndpoints(ctx)
	for {
		cs.Sync(ctx)
		t := cs.opts.Clock.NewTimer(cs.opts.Interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-cs.wake:
			t.Stop()
		}
	}
}

// Sync lists the classes, connects to those that select the node (the
// server decides, by the node's labels), writes their keys and probes
// them, and sets the report. A failed listing keeps what was known.
func (cs *Classes) Sync(ctx context.Context) {
	cs.syncMu.Lock()
	defer cs.syncMu.Unlock()
	list, err := cs.opts.API.List(ctx, &apiv1.ListStorageClassesRequest{})
	if err != nil {
		cs.log.Warn("listing storage classes", "err", err)
		cs.report.Tried()
		return
	}
	cs.mu.Lock()
	old := cs.classes
	cs.mu.Unlock()
	next := map[string]*Class{}
	// Probed side by side: a class whose monitors do not answer takes
	// ceph.ConnectTimeout, which must not hold up the others' news.
	var probes sync.WaitGroup
	for _, sc := range list.GetItems() {
		name := sc.GetMetadata().GetName()
		conn, err := cs.opts.API.Connect(ctx, &apiv1.ConnectStorageClassRequest{Name: name})
		if status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.NotFound {
			continue // not this node's
		}
		// The spec alone (with the key): the server's own status writes
		// are watch events too.
		if o := old[name]; err == nil && o != nil && proto.Equal(o.Spec.GetSpec(), conn.GetStorageClass().GetSpec()) &&
			cs.opts.Clock.Since(o.probedAt) < cs.opts.Interval*9/10 {
			// Probed lately as it is: a poke for another class's event
			// probes that one only.
			next[name] = o
			continue
		}
		c := &Class{Name: name, Spec: conn.GetStorageClass(), Status: &apiv1.NodeStorage{Class: name}, probedAt: cs.opts.Clock.Now()}
		if err != nil {
			c.Spec = sc
			c.Status.Message = fmt.Sprintf("getting the class: %v", status.Convert(err).Message())
		} else {
			probes.Go(func() { cs.probe(ctx, c) })
		}
		next[name] = c
	}
	probes.Wait()
	cs.mu.Lock()
	old = cs.classes
	for name, c := range next {
		// A class not reachable now keeps the endpoints last read: its
		// running guests reconnect once it is back.
		if o := old[name]; o != nil && o != c && c.endpoints == nil && !c.refused {
			c.endpoints, c.local = o.endpoints, o.local
		}
	}
	cs.classes = next
	cs.mu.Unlock()
	for name := range old {
		if _, ok := next[name]; !ok {
			// Its key is not kept for a class gone from this node.
			_ = os.RemoveAll(filepath.Join(cs.opts.Dir, name))
			cs.removeConf(name)
		}
	}
	cs.pushEndpoints(ctx)
	items := make([]*apiv1.NodeStorage, 0, len(next))
	for _, c := range next {
		items = append(items, c.Status)
		if !c.Status.GetReady() {
			cs.log.Warn("storage class not reachable", "class", c.Name, "cause", c.Status.GetMessage())
		}
	}
	slices.SortFunc(items, func(a, b *apiv1.NodeStorage) int {
		return strings.Compare(a.GetClass(), b.GetClass())
	})
	cs.report.Set(&apiv1.NodeStorageList{Items: items})
}

// probe checks that the node reaches c and sets c's status: an rbd class
// with its key written and the pool listed, a shared filesystem with its
// path a directory the node can write in.
func (cs *Classes) probe(ctx context.Context, c *Class) {
	switch {
	case c.RBD() != nil:
		r := c.RBD()
		dir := filepath.Join(cs.opts.Dir, c.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			c.Status.Message = err.Error()
			return
		}
		key := filepath.Join(dir, "key")
		if err := fsutil.WriteFileAtomic(key, []byte(r.GetKey()), 0o600); err != nil {
			c.Status.Message = fmt.Sprintf("writing the key file: %v", err)
			return
		}
		netns := cs.opts.NetNS()
		c.Conn = &ceph.Conn{Monitors: r.GetMonitors(), Pool: r.GetPool(), User: r.GetUser(), KeyFile: key, NetNS: netns, Runner: cs.opts.Runner}
		addr, err := sourceAddress(netns, r.GetMonitors())
		if err != nil {
			c.Status.Message = err.Error()
			return
		}
		c.Status.Address = addr.String()
		if err := c.Conn.Probe(ctx); err != nil {
			c.Status.Message = ceph.ProbeMessage(err)
			return
		}
		if err := checkCephx(ctx, c); err != nil {
			c.refused = errors.Is(err, ceph.ErrNoCephx)
			c.Status.Message = err.Error()
			return
		}
		if err := cs.writeConf(c); err != nil {
			c.Status.Message = fmt.Sprintf("writing the class's ceph.conf for QEMU: %v", err)
			return
		}
		c.endpoints, c.local = cs.readEndpoints(ctx, c)
	case c.SharedPath() != "":
		if err := checkShared(c.SharedPath()); err != nil {
			c.Status.Message = err.Error()
			return
		}
	default:
		c.Status.Message = "a storage class of a kind this node does not know"
		return
	}
	c.Status.Ready = true
}

// sourceAddress is the node's address towards the first monitor that
// has a route: the one Ceph sees its clients at, and fences it by.
func sourceAddress(netns string, monitors []string) (netip.Addr, error) {
	var last error
	for _, m := range monitors {
		ap, err := netip.ParseAddrPort(m)
		if err != nil {
			continue
		}
		a, err := routeSource(netns, ap.Addr())
		if err == nil {
			return a, nil
		}
		last = err
	}
	return netip.Addr{}, fmt.Errorf("no route to any monitor (spec.rbd.monitors): %w", last)
}

// watch pokes the room on every class event, so that a class made or
// changed is probed within seconds, not at the next interval. A broken
// watch is opened again after a pause; the interval's listing covers the
// gap.
func (cs *Classes) watch(ctx context.Context) {
	for ctx.Err() == nil {
		stream, err := cs.opts.API.Watch(ctx, &apiv1.WatchStorageClassesRequest{Options: &apiv1.WatchOptions{}})
		for err == nil {
			var ev *apiv1.StorageClassEvent
			if ev, err = stream.Recv(); err == nil && ev.GetType() != apiv1.EventType_SYNCED {
				cs.Poke()
			}
		}
		if ctx.Err() != nil {
			return
		}
		cs.log.Debug("storage class watch ended; opening it again", "err", err)
		t := cs.opts.Clock.NewTimer(watchRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// watchRetry is the pause before a broken watch is opened again.
const watchRetry = 5 * time.Second

// SharedLayouts are the directories of the shared filesystem classes the
// node reaches now.
func (cs *Classes) SharedLayouts() []nodedir.Layout {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	var out []nodedir.Layout
	for _, c := range cs.classes {
		if c.SharedPath() != "" && c.Status.GetReady() {
			out = append(out, c.SharedLayout())
		}
	}
	return out
}
