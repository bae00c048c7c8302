package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/bench"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/cluster"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/multinode"
)

// migEnv is the migration benchmark's two-host cluster: two private
// libvirt hosts (multinode), a server and a node agent per host
// (cluster), a watch on the namespace's VMIs and migrations, and a direct
// libvirt connection to each host for the raw path.
type migEnv struct {
	e     *env
	ns    string
	dir   string // raw domains' console logs: a path both hosts see
	hosts *multinode.Run
	c     *cluster.Cluster
	a, b  *cluster.Node
	lv    map[*cluster.Node]nodeConn
	tr    *bench.Tracker
	mw    *migWatch
	// ceph, when the storage benchmark started one in the hosts' hub,
	// stops after the cluster (no QEMU uses it then) and before the
	// hosts (whose Close kills what runs in the hub).
	ceph *ceph.Cluster
}

// slogLogf reports the harness's steps through the benchmark's log.
type slogLogf struct{ log *slog.Logger }

func (l slogLogf) Logf(format string, args ...any) { l.log.Info(fmt.Sprintf(format, args...)) }

// startMigEnv brings the two hosts and the cluster up; close undoes all of
// it, also after a failure here.
func startMigEnv(ctx context.Context, e *env) (m *migEnv, err error) {
	return startMigEnvWith(ctx, e, "mig", multinode.Options{NamePrefix: e.prefix}, nil)
}

// startMigEnvWith is startMigEnv with the hosts' options, the cluster's
// dir and namespace suffix, and a hook run once the hosts are up and
// before the cluster starts (a service in their hub).
func startMigEnvWith(ctx context.Context, e *env, suffix string, hostOpts multinode.Options, hostsUp func(*migEnv) error) (m *migEnv, err error) {
	m = &migEnv{e: e, ns: e.prefix + "-" + suffix, dir: filepath.Join(e.work, suffix+"-raw"), lv: map[*cluster.Node]nodeConn{}}
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, m.close())
		}
	}()
	if m.hosts, err = multinode.Launch(ctx, 2, hostOpts, slogLogf{e.log}); err != nil {
		return m, err
	}
	if hostsUp != nil {
		if err := hostsUp(m); err != nil {
			return m, err
		}
	}
	// The cluster's dir is under the run's: short (launcher sockets), and
	// seen at the same path by both hosts (kernels, console logs).
	if m.c, err = cluster.Start(ctx, m.hosts.Nodes(), cluster.Options{
		Agent: e.agent, Launcher: e.launcher, GuestDir: e.images,
		Dir: filepath.Join(e.work, suffix), Namespace: m.ns,
	}); err != nil {
		return m, err
	}
	m.a, m.b = m.c.Nodes[0], m.c.Nodes[1]
	for _, n := range m.c.Nodes {
		conn, err := openNodeLibvirt(n.URI)
		if err != nil {
			return m, err
		}
		m.lv[n] = conn
	}
	if m.tr, err = bench.NewTracker(ctx, m.c.API, m.ns); err != nil {
		return m, err
	}
	m.mw, err = newMigWatch(ctx, m.c.API, m.ns)
	return m, err
}

// close stops the watches, the cluster (agents, launchers, domains,
// server) and the hosts (daemons, namespaces, dirs), whatever state they
// got to.
func (m *migEnv) close() error {
	if m.mw != nil {
		m.mw.close()
	}
	if m.tr != nil {
		m.tr.Close()
	}
	var errs []error
	for _, conn := range m.lv {
		errs = append(errs, conn.Close())
	}
	if m.c != nil {
		errs = append(errs, m.c.Close())
	}
	if m.ceph != nil {
		errs = append(errs, m.ceph.Close())
	}
	if m.hosts != nil {
		errs = append(errs, m.hosts.Close(slogLogf{m.e.log}, false))
	}
	return errors.Join(errs...)
}

// other is the node that is not n.
func (m *migEnv) other(n *cluster.Node) *cluster.Node {
	if n == m.a {
		return m.b
	}
	return m.a
}

// createOnA creates the VMs and waits until each runs on node A, is
// LiveMigratable and its guest booted. Node B is cordoned meanwhile, so
// that the VMs are placed on A without a node selector a migration's
// target selector could not override.
func (m *migEnv) createOnA(ctx context.Context, names []string) error {
	vms := make([]*apiv1.VirtualMachine, len(names))
	for i, name := range names {
		vms[i] = m.guestVM(name)
	}
	return m.placeOnA(ctx, vms)
}

// guestVM is the test guest as the migration benchmarks run it.
func (m *migEnv) guestVM(name string) *apiv1.VirtualMachine {
	return bench.GuestVM(m.ns, name, guestMemory, m.a.Kernel, testguest.InitrdFile, testguest.Cmdline(testguest.Hostname("bench")))
}

// placeOnA is createOnA for VMs of any spec.
func (m *migEnv) placeOnA(ctx context.Context, vms []*apiv1.VirtualMachine) error {
	if _, err := m.c.API.Nodes.Cordon(ctx, &apiv1.CordonNodeRequest{Name: m.b.Name}); err != nil {
		return fmt.Errorf("cordoning %s: %w", m.b.Name, err)
	}
	names := make([]string, len(vms))
	for i, vm := range vms {
		names[i] = vm.GetMetadata().GetName()
		if _, err := m.c.API.VMs.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
			return fmt.Errorf("creating %s: %w", names[i], err)
		}
	}
	err := waitUntil(ctx, 3*time.Minute, fmt.Sprintf("%d VMs Running and LiveMigratable on %s", len(names), m.a.Name), func() bool {
		for _, name := range names {
			v := m.tr.VMI(name)
			if v.GetStatus().GetPhase() != apiv1.PhaseRunning || v.GetStatus().GetNodeName() != m.a.Name ||
				!apiv1.IsConditionTrue(v.GetStatus().GetConditions(), apiv1.ConditionLiveMigratable) {
				return false
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	if _, err := m.c.API.Nodes.Uncordon(ctx, &apiv1.CordonNodeRequest{Name: m.b.Name}); err != nil {
		return fmt.Errorf("uncordoning %s: %w", m.b.Name, err)
	}
	doms := make([]string, len(names))
	for i, name := range names {
		doms[i] = apiv1.DomainName(m.ns, name)
	}
	return m.waitBooted(ctx, m.a, doms)
}

// waitBooted waits until the guest of every domain printed its boot
// marker on its serial console, so that what migrates is a booted guest.
func (m *migEnv) waitBooted(ctx context.Context, n *cluster.Node, doms []string) error {
	logs := make([]string, len(doms))
	for i, d := range doms {
		p, err := m.lv[n].SerialLogPath(d)
		if err != nil {
			return err
		}
		if p == "" {
			return fmt.Errorf("domain %s logs no serial console", d)
		}
		logs[i] = p
	}
	return waitUntil(ctx, 3*time.Minute, fmt.Sprintf("%d guests to boot (%s)", len(doms), testguest.MarkerBooted), func() bool {
		for _, p := range logs {
			b, err := os.ReadFile(p)
			if err != nil {
				return false
			}
			if _, ok := testguest.FindMarker(string(b), testguest.MarkerBooted); !ok {
				return false
			}
		}
		return true
	})
}

// deleteVMs deletes the VMs and waits until no domain of the namespace is
// left on either host.
func (m *migEnv) deleteVMs(ctx context.Context, names []string) error {
	for _, name := range names {
		if _, err := m.c.API.VMs.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: &apiv1.ObjectKey{Namespace: m.ns, Name: name}}); err != nil {
			return fmt.Errorf("deleting %s: %w", name, err)
		}
	}
	return waitUntil(ctx, 2*time.Minute, "the VMs' domains to be gone", func() bool {
		for _, conn := range m.lv {
			if ds, err := conn.Names(m.ns + "_"); err != nil || len(ds) > 0 {
				return false
			}
		}
		return true
	})
}

// migrate creates a migration of VM name to node `to` through the API
// and returns when its phase is final, as the watch saw it.
func (m *migEnv) migrate(ctx context.Context, name, migName string, to *cluster.Node) (vpMigration, error) {
	mig := &apiv1.VirtualMachineInstanceMigration{
		Metadata: &apiv1.ObjectMeta{Namespace: m.ns, Name: migName},
		Spec:     &apiv1.VirtualMachineInstanceMigrationSpec{VmiName: name, AddedNodeSelector: map[string]string{apiv1.LabelNodeName: to.Name}},
	}
	v := vpMigration{name: migName, created: time.Now()}
	if _, err := m.c.API.Migrations.Create(ctx, &apiv1.CreateMigrationRequest{Migration: mig}); err != nil {
		return v, fmt.Errorf("creating migration %s: %w", migName, err)
	}
	final, seen, err := m.mw.waitFinal(ctx, migName, 3*time.Minute)
	if err != nil {
		return v, err
	}
	v.final, v.seen = final, seen
	if ph := final.GetStatus().GetPhase(); ph != apiv1.MigrationSucceeded {
		return v, fmt.Errorf("migration %s of %s to %s ended %s: %s: %s", migName, name, to.Name, ph,
			final.GetStatus().GetReason(), final.GetStatus().GetMessage())
	}
	return v, nil
}

// vpMigration is one migration through virtplane: when the Create call
// was issued, when the watch saw it final, and its final object.
type vpMigration struct {
	name          string
	created, seen time.Time
	final         *apiv1.VirtualMachineInstanceMigration
}

func (v vpMigration) wall() time.Duration { return v.seen.Sub(v.created) }

func (v vpMigration) progress() *apiv1.MigrationProgress {
	return v.final.GetStatus().GetMigrationState().GetProgress()
}

func (v vpMigration) downtime() time.Duration {
	return time.Duration(v.progress().GetDowntimeMs()) * time.Millisecond
}

func (v vpMigration) job() time.Duration {
	return time.Duration(v.progress().GetElapsedMs()) * time.Millisecond
}

// call is the source launcher's migrate call: the migration state's start
// and end timestamps; 0 when either is unset.
func (v vpMigration) call() time.Duration {
	st := v.final.GetStatus().GetMigrationState()
	a, b := tsTime(st.GetStartTimestamp().AsTime()), tsTime(st.GetEndTimestamp().AsTime())
	if a.IsZero() || b.IsZero() {
		return 0
	}
	return b.Sub(a)
}

// phase is when the migration entered phase (server clock), zero if never.
func (v vpMigration) phase(p string) time.Time {
	return apiv1.PhaseSince(v.final.GetStatus().GetPhaseTransitionTimestamps(), p)
}

// migWatch follows a namespace's migrations through the API and records
// when each was first seen in a final phase.
type migWatch struct {
	mu    sync.Mutex
	final map[string]*apiv1.VirtualMachineInstanceMigration
	seen  map[string]time.Time
	// changed is closed (and replaced) at every final migration seen:
	// several goroutines wait at once.
	changed chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
}

func newMigWatch(ctx context.Context, c *client.Client, ns string) (*migWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &migWatch{final: map[string]*apiv1.VirtualMachineInstanceMigration{}, seen: map[string]time.Time{},
		changed: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	synced := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(w.done)
		client.Follow(ctx, func(ctx context.Context) (apiv1.Migrations_WatchClient, error) {
			return c.Migrations.Watch(ctx, &apiv1.WatchMigrationsRequest{Options: &apiv1.WatchOptions{Namespace: ns}})
		}, func(ev *apiv1.MigrationEvent) {
			if ev.GetType() == apiv1.EventType_SYNCED {
				once.Do(func() { close(synced) })
			}
			if o := ev.GetObject(); o != nil && apiv1.IsMigrationFinal(o.GetStatus().GetPhase()) {
				w.saw(o)
			}
		})
	}()
	select {
	case <-synced:
		return w, nil
	case <-time.After(30 * time.Second):
		w.close()
		return nil, fmt.Errorf("watching the migrations of %s: no listing within 30 s", ns)
	}
}

func (w *migWatch) saw(o *apiv1.VirtualMachineInstanceMigration) {
	now := time.Now()
	name := o.GetMetadata().GetName()
	w.mu.Lock()
	if _, ok := w.seen[name]; !ok {
		w.seen[name], w.final[name] = now, o
		close(w.changed)
		w.changed = make(chan struct{})
	}
	w.mu.Unlock()
}

// waitFinal waits until migration name was seen final.
func (w *migWatch) waitFinal(ctx context.Context, name string, timeout time.Duration) (*apiv1.VirtualMachineInstanceMigration, time.Time, error) {
	deadline := time.After(timeout)
	for {
		w.mu.Lock()
		o, at, changed := w.final[name], w.seen[name], w.changed
		w.mu.Unlock()
		if o != nil {
			return o, at, nil
		}
		select {
		case <-ctx.Done():
			return nil, time.Time{}, ctx.Err()
		case <-deadline:
			return nil, time.Time{}, fmt.Errorf("migration %s not final after %s", name, timeout)
		case <-changed:
		}
	}
}

func (w *migWatch) close() {
	w.cancel()
	<-w.done
}
