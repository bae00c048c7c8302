package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// entry is a live connection to the launcher of one VMI.
type entry struct {
	key, uid string
	policy   string
	client   launcher.Client
	handle   launcher.Handle
	// synced: Sync succeeded on this launcher, so it has adopted or
	// created the domain. A new launcher always syncs once.
	synced bool
	dead   atomic.Bool
	cancel context.CancelFunc // ends the event watch
}

func (e *entry) isDead() bool { return e.dead.Load() }

func (e *entry) stopWatching() {
	if e.cancel != nil {
		e.cancel()
	}
}

// launcherTable maps VMI keys to launcher connections. There is at most
// one per key: a VMI that reuses a name waits until the old domain is
// cleaned up.
type launcherTable struct {
	mu   sync.Mutex
	m    map[string]*entry
	gone map[launcher.Handle]bool // handles that failed to reattach or died
}

func newLauncherTable() *launcherTable { return &launcherTable{m: map[string]*entry{}} }

func (t *launcherTable) get(key string) *entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[key]
}

func (t *launcherTable) put(e *entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m[e.key] = e
}

// remove drops key's entry if it is still e.
func (t *launcherTable) remove(e *entry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[e.key] == e {
		delete(t.m, e.key)
	}
}

// list returns the entries by key.
func (t *launcherTable) list() []*entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.SortedFunc(maps.Values(t.m), func(a, b *entry) int { return strings.Compare(a.key, b.key) })
}

// drain empties the table and returns what it held.
func (t *launcherTable) drain() []*entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := slices.Collect(maps.Values(t.m))
	t.m = map[string]*entry{}
	return out
}

// errLauncherUnavailable marks failures to reach or start a launcher:
// they are retried within the launcher grace, never reported as a
// domain's failure.
var errLauncherUnavailable = errors.New("launcher unavailable")

// unavailable reports whether err means the launcher could not be
// reached, as opposed to an answer from it (a libvirt error). A canceled
// call is neither: the agent cancels its calls only when it stops, and a
// launcher must not be taken for dead (and replaced) because of that.
func unavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled {
		return false
	}
	if errors.Is(err, errLauncherUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// ensureLauncher returns a live launcher for rec's VMI: the connection
// already held, a reattached one, or a newly launched one. A new handle is
// saved before ensureLauncher returns; if saving fails the launcher is
// still returned with the error, so it is not launched twice and the save
// is retried (see persistHandle).
func (a *Agent) ensureLauncher(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI) (*entry, error) {
	key := rec.Key()
	e := a.launchers.get(key)
	if e != nil && e.uid == rec.UID && !e.isDead() {
		return e, a.persistHandle(rec, e)
	}
	if e != nil {
		// Dead or stale: make sure it cannot act on the domain any more
		// (a hung launcher that wakes up must not fence a guest that a
		// new launcher now runs), then forget it. Stop kills by pid
		// when the launcher does not answer.
		a.launchers.remove(e)
		e.stopWatching()
		sctx, cancel := context.WithTimeout(ctx, a.opts.Timing.ReattachTimeout)
		if err := e.client.Stop(sctx); err != nil {
			a.log.Warn("stopping an unreachable launcher failed", "vmi", key, "err", err)
		}
		cancel()
		a.launchers.markGone(e.handle)
	}

	if rec.HasLauncher() && !a.launchers.isGone(rec.Handle) {
		rctx, cancel := context.WithTimeout(ctx, a.opts.Timing.ReattachTimeout)
		c, err := a.opts.Launchers.Reattach(rctx, rec.Handle)
		cancel()
		if err == nil {
			e := a.adopt(ctx, rec, c, rec.Handle)
			a.log.Info("reattached to launcher", "vmi", key, "pid", rec.Handle.Pid)
			return e, nil
		}
		a.launchers.markGone(rec.Handle)
		a.log.Info("launcher is gone; starting a new one", "vmi", key, "pid", rec.Handle.Pid, "err", err)
	}
	if err := a.endOldLaunchers(ctx, rec, e); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errLauncherUnavailable, key, err)
	}

	if vmi == nil {
		vmi = stubVMI(rec)
	}
	c, h, err := a.opts.Launchers.Launch(ctx, vmi, rec.DomainName)
	if err != nil {
		return nil, fmt.Errorf("%w: launching for %s: %w", errLauncherUnavailable, key, err)
	}
	a.log.Info("launched launcher", "vmi", key, "pid", h.Pid, "domain", rec.DomainName)
	e = a.adopt(ctx, rec, c, h)
	return e, a.persistHandle(rec, e)
}

// endOldLaunchers makes sure no launcher the agent knew of for rec still
// runs before a new one is started. One that could not be reattached may
// still be alive — hung, or merely slow after an agent restart — holding
// the domain lock (the new launcher would be refused) and perhaps an
// armed lease watchdog that would later fence the guest its successor
// runs. KillLauncher checks the pid first and is a no-op for a launcher
// that is gone, so this costs nothing in the common case.
func (a *Agent) endOldLaunchers(ctx context.Context, rec *state.VMI, old *entry) error {
	var handles []launcher.Handle
	if rec.HasLauncher() {
		handles = append(handles, rec.Handle)
	}
	if old != nil && old.handle.Pid > 0 && old.handle != rec.Handle {
		handles = append(handles, old.handle)
	}
	for _, h := range handles {
		kctx, cancel := context.WithTimeout(ctx, a.opts.Timing.CallTimeout)
		err := a.opts.Launchers.KillLauncher(kctx, h)
		cancel()
		if err != nil {
			return fmt.Errorf("ending the unreachable launcher (pid %d): %w", h.Pid, err)
		}
	}
	return nil
}

// persistHandle saves the entry's handle in rec unless it is there
// already: Nomad's rule, a launcher is recorded before anything is
// reported about it.
func (a *Agent) persistHandle(rec *state.VMI, e *entry) error {
	if rec.Handle == e.handle {
		return nil
	}
	next := *rec
	next.Handle = e.handle
	if err := a.db.PutVMI(&next); err != nil {
		return fmt.Errorf("saving launcher handle of %s: %w", rec.Key(), err)
	}
	*rec = next
	return nil
}

// adopt registers a launcher connection and starts watching it.
func (a *Agent) adopt(ctx context.Context, rec *state.VMI, c launcher.Client, h launcher.Handle) *entry {
	// The watch lives as long as the agent runs, not as long as the
	// reconcile that started it.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e := &entry{key: rec.Key(), uid: rec.UID, policy: rec.NodeFailurePolicy, client: c, handle: h, cancel: cancel}
	a.launchers.put(e)
	go a.watchEvents(wctx, e)
	if e.policy == apiv1.NodeFailurePolicyRestartElsewhere {
		if err := a.renewLease(ctx, e); err != nil {
			a.log.Warn("arming launcher lease failed", "vmi", e.key, "err", err)
		}
	}
	return e
}

// watchEvents queues the VMI on every domain event, and marks the
// launcher dead when its stream ends while the agent still runs.
func (a *Agent) watchEvents(ctx context.Context, e *entry) {
	ch, err := e.client.Events(ctx)
	if err != nil {
		if ctx.Err() == nil {
			a.markDead(e, fmt.Errorf("opening event stream: %w", err))
		}
		return
	}
	for range ch {
		a.queue.Add(e.key)
	}
	if ctx.Err() == nil {
		a.markDead(e, errors.New("event stream ended"))
	}
}

func (a *Agent) markDead(e *entry, why error) {
	if e.dead.CompareAndSwap(false, true) {
		a.log.Warn("launcher unreachable", "vmi", e.key, "pid", e.handle.Pid, "err", why)
		a.queue.Add(e.key)
	}
}

// pingLaunchers pings every launcher, each LivenessInterval: a launcher
// that hangs keeps its event stream open, so the stream alone does not
// show it.
func (a *Agent) pingLaunchers(ctx context.Context) {
	var wg sync.WaitGroup
	for _, e := range a.launchers.list() {
		if e.isDead() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The ping's deadline is on the agent's clock, like the
			// interval: a launcher is hung when PingTimeout passed on
			// that clock without an answer.
			pctx, cancel := context.WithCancel(ctx)
			defer cancel()
			timeout := a.opts.Clock.AfterFunc(a.opts.Timing.PingTimeout, cancel)
			defer timeout.Stop()
			if err := e.client.Ping(pctx); err != nil && ctx.Err() == nil {
				a.markDead(e, fmt.Errorf("ping: %w", err))
			}
		}()
	}
	wg.Wait()
}

// stubVMI stands in for a VMI that is gone when a launcher must be started
// to shut down or delete its domain.
func stubVMI(rec *state.VMI) *apiv1.VirtualMachineInstance {
	grace := rec.GracePeriodSeconds
	return &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Uid: rec.UID, Namespace: rec.Namespace, Name: rec.Name,
			Annotations: map[string]string{apiv1.AnnotationNodeFailurePolicy: rec.NodeFailurePolicy}},
		Spec: &apiv1.VirtualMachineInstanceSpec{TerminationGracePeriodSeconds: &grace},
	}
}
