// Package launchers holds the node agent's connections to its launcher
// processes, one per VMI: launching, reattaching after an agent restart,
// watching each one's domain events, pinging them for liveness, and
// saving every handle in the state database before anything is reported
// about its launcher (Nomad's rule). The node agent owns the one Set; its
// roles (the handler, the migration source and target, snapshots,
// restores) reach a VMI's launcher through it.
package launchers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// Conn is a live connection to the launcher of one VMI.
type Conn struct {
	Key, UID string
	Policy   string // the VMI's node failure policy
	Client   launcher.Client
	Handle   launcher.Handle
	// Synced: Sync succeeded on this launcher, so it has adopted or
	// created the domain. A new launcher always syncs once. Only the
	// worker handling Key reads and writes it.
	Synced bool
	// SyncedSizes is what the last Sync carried of the VMI's persistent
	// volume sizes (the handler's fingerprint of them): when the VM
	// controller grows them in the running instance's spec, the handler
	// syncs again and the launcher grows the disks. Only the worker
	// handling Key reads and writes it.
	SyncedSizes string
	// Hotplug is what the handler's hotplug step last did through this
	// connection. Only the worker handling Key reads and writes it.
	Hotplug HotplugState
	dead    atomic.Bool
	cancel  context.CancelFunc // ends the event watch
}

// HotplugState is the hotplug step's memory of one instance's disks.
type HotplugState struct {
	// Disks is the fingerprint of the VMI's disks the step last acted on.
	Disks string
	// Settled: every hotpluggable volume of Disks was Ready; until the
	// disks change, the step does not look again.
	Settled bool
	// Retries counts the passes in a row over Disks that left a volume
	// not Ready: the next look waits the longer.
	Retries int
}

// Dead reports a launcher that stopped answering.
func (c *Conn) Dead() bool { return c.dead.Load() }

// StopWatching ends the event watch.
func (c *Conn) StopWatching() {
	if c.cancel != nil {
		c.cancel()
	}
}

// Records is what the set needs of the state database.
type Records interface {
	PutVMI(rec *state.VMI) error
}

// Options configure a Set.
type Options struct {
	Manager launcher.Manager
	Records Records
	// Enqueue asks for the VMI key to be handled again: on every domain
	// event, and when a launcher is found dead.
	Enqueue func(key string)
	// Arm renews the lease watchdog of a RestartElsewhere launcher when
	// it is adopted.
	Arm func(ctx context.Context, c *Conn) error
	// ReattachTimeout bounds a reattach and stopping a launcher that
	// does not answer; CallTimeout other calls; PingTimeout a liveness
	// ping, on Clock.
	ReattachTimeout, CallTimeout, PingTimeout time.Duration
	Clock                                     clock.WithDelayedExecution
	Logger                                    *slog.Logger
}

// Set maps VMI keys to launcher connections. There is at most one per
// key: a VMI that reuses a name waits until the old domain is cleaned up.
type Set struct {
	opts Options
	log  *slog.Logger

	mu   sync.Mutex
	m    map[string]*Conn
	gone map[launcher.Handle]bool // handles that failed to reattach or died
}

// New returns an empty set.
func New(opts Options) *Set {
	return &Set{opts: opts, log: opts.Logger, m: map[string]*Conn{}, gone: map[launcher.Handle]bool{}}
}

// Get returns key's connection, or nil.
func (s *Set) Get(key string) *Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key]
}

func (s *Set) put(c *Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[c.Key] = c
}

// Remove drops c's key if it is still c.
func (s *Set) Remove(c *Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[c.Key] == c {
		delete(s.m, c.Key)
	}
}

// List returns the connections by key.
func (s *Set) List() []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.SortedFunc(maps.Values(s.m), func(a, b *Conn) int { return strings.Compare(a.Key, b.Key) })
}

// Drain empties the set and returns what it held.
func (s *Set) Drain() []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Collect(maps.Values(s.m))
	s.m = map[string]*Conn{}
	return out
}

// markGone remembers a handle whose launcher could not be reattached, so
// the handler does not wait for it again.
func (s *Set) markGone(h launcher.Handle) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone[h] = true
}

func (s *Set) isGone(h launcher.Handle) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gone[h]
}

// ErrUnavailable marks failures to reach or start a launcher: they are
// retried within the launcher grace, never reported as a domain's
// failure.
var ErrUnavailable = errors.New("launcher unavailable")

// Unavailable reports whether err means the launcher could not be
// reached, as opposed to an answer from it (a libvirt error). A canceled
// call is neither: the agent cancels its calls only when it stops, and a
// launcher must not be taken for dead (and replaced) because of that.
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled {
		return false
	}
	if errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return true
	}
	return false
}

// ErrorMessage is the message a launcher error carries, without the gRPC
// decoration: for a libvirt error, libvirt's own text.
func ErrorMessage(err error) string {
	// status.FromError would return the whole wrapped text; the innermost
	// status carries the launcher's message alone.
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		if s := se.GRPCStatus(); s != nil {
			return s.Message()
		}
	}
	return err.Error()
}

// Ensure returns a live launcher for rec's VMI: the connection already
// held, a reattached one, or a newly launched one. A new handle is saved
// before Ensure returns; if saving fails the launcher is still returned
// with the error, so it is not launched twice and the save is retried
// (see Persist). vmi may be nil when the VMI is gone.
func (s *Set) Ensure(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI) (*Conn, error) {
	key := rec.Key()
	c := s.Get(key)
	if c != nil && c.UID == rec.UID && !c.Dead() {
		return c, s.Persist(rec, c)
	}
	if c != nil {
		// Dead or stale: make sure it cannot act on the domain any more
		// (a hung launcher that wakes up must not fence a guest that a
		// new launcher now runs), then forget it. Stop kills by pid
		// when the launcher does not answer.
		s.Remove(c)
		c.StopWatching()
		sctx, cancel := context.WithTimeout(ctx, s.opts.ReattachTimeout)
		if err := c.Client.Stop(sctx); err != nil {
			s.log.Warn("stopping an unreachable launcher failed", "vmi", key, "err", err)
		}
		cancel()
		s.markGone(c.Handle)
	}

	if rec.HasLauncher() && !s.isGone(rec.Handle) {
		rctx, cancel := context.WithTimeout(ctx, s.opts.ReattachTimeout)
		cl, err := s.opts.Manager.Reattach(rctx, rec.Handle)
		cancel()
		if err == nil {
			c := s.adopt(ctx, rec, cl, rec.Handle)
			s.log.Info("reattached to launcher", "vmi", key, "pid", rec.Handle.Pid)
			return c, nil
		}
		s.markGone(rec.Handle)
		s.log.Info("launcher is gone; starting a new one", "vmi", key, "pid", rec.Handle.Pid, "err", err)
	}
	if err := s.endOld(ctx, rec, c); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, key, err)
	}

	if vmi == nil {
		vmi = stubVMI(rec)
	}
	cl, h, err := s.opts.Manager.Launch(ctx, vmi, rec.DomainName)
	if err != nil {
		return nil, fmt.Errorf("%w: launching for %s: %w", ErrUnavailable, key, err)
	}
	s.log.Info("launched launcher", "vmi", key, "pid", h.Pid, "domain", rec.DomainName)
	c = s.adopt(ctx, rec, cl, h)
	return c, s.Persist(rec, c)
}

// Reattach reconnects to the launcher of a record of the previous run
// (Nomad's RecoverTask); a launcher that is gone is remembered so that
// Ensure starts a new one without trying again.
func (s *Set) Reattach(ctx context.Context, rec *state.VMI) error {
	rctx, cancel := context.WithTimeout(ctx, s.opts.ReattachTimeout)
	cl, err := s.opts.Manager.Reattach(rctx, rec.Handle)
	cancel()
	if err != nil {
		s.markGone(rec.Handle)
		return err
	}
	s.adopt(ctx, rec, cl, rec.Handle)
	return nil
}

// endOld makes sure no launcher the agent knew of for rec still runs
// before a new one is started. One that could not be reattached may
// still be alive — hung, or merely slow after an agent restart — holding
// the domain lock (the new launcher would be refused) and perhaps an
// armed lease watchdog that would later fence the guest its successor
// runs. KillLauncher checks the pid first and is a no-op for a launcher
// that is gone, so this costs nothing in the common case.
func (s *Set) endOld(ctx context.Context, rec *state.VMI, old *Conn) error {
	var handles []launcher.Handle
	if rec.HasLauncher() {
		handles = append(handles, rec.Handle)
	}
	if old != nil && old.Handle.Pid > 0 && old.Handle != rec.Handle {
		handles = append(handles, old.Handle)
	}
	for _, h := range handles {
		kctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
		err := s.opts.Manager.KillLauncher(kctx, h)
		cancel()
		if err != nil {
			return fmt.Errorf("ending the unreachable launcher (pid %d): %w", h.Pid, err)
		}
	}
	return nil
}

// Persist saves the connection's handle in rec unless it is there
// already: Nomad's rule, a launcher is recorded before anything is
// reported about it.
func (s *Set) Persist(rec *state.VMI, c *Conn) error {
	if rec.Handle == c.Handle {
		return nil
	}
	next := *rec
	next.Handle = c.Handle
	if err := s.opts.Records.PutVMI(&next); err != nil {
		return fmt.Errorf("saving launcher handle of %s: %w", rec.Key(), err)
	}
	*rec = next
	return nil
}

// adopt registers a launcher connection and starts watching it.
func (s *Set) adopt(ctx context.Context, rec *state.VMI, cl launcher.Client, h launcher.Handle) *Conn {
	// The watch lives as long as the agent runs, not as long as the
	// reconcile that started it.
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c := &Conn{Key: rec.Key(), UID: rec.UID, Policy: rec.NodeFailurePolicy, Client: cl, Handle: h, cancel: cancel}
	s.put(c)
	go s.watchEvents(wctx, c)
	if c.Policy == apiv1.NodeFailurePolicyRestartElsewhere {
		if err := s.opts.Arm(ctx, c); err != nil {
			s.log.Warn("arming launcher lease failed", "vmi", c.Key, "err", err)
		}
	}
	return c
}

// watchEvents queues the VMI on every domain event, and marks the
// launcher dead when its stream ends while the agent still runs.
func (s *Set) watchEvents(ctx context.Context, c *Conn) {
	ch, err := c.Client.Events(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.MarkDead(c, fmt.Errorf("opening event stream: %w", err))
		}
		return
	}
	for range ch {
		s.opts.Enqueue(c.Key)
	}
	if ctx.Err() == nil {
		s.MarkDead(c, errors.New("event stream ended"))
	}
}

// MarkDead records that c stopped answering and queues its VMI.
func (s *Set) MarkDead(c *Conn, why error) {
	if c.dead.CompareAndSwap(false, true) {
		s.log.Warn("launcher unreachable", "vmi", c.Key, "pid", c.Handle.Pid, "err", why)
		s.opts.Enqueue(c.Key)
	}
}

// GetDomain asks c for its domain within the call timeout; a launcher
// that cannot be reached is marked dead.
func (s *Set) GetDomain(ctx context.Context, c *Conn) (*launcherpb.DomainStatus, error) {
	cctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	d, err := c.Client.GetDomain(cctx)
	if err != nil {
		if Unavailable(err) {
			s.MarkDead(c, err)
		}
		return nil, fmt.Errorf("getting domain of %s: %w", c.Key, err)
	}
	return d, nil
}

// Ping pings every launcher (the agent does so each liveness interval):
// a launcher that hangs keeps its event stream open, so the stream alone
// does not show it.
func (s *Set) Ping(ctx context.Context) {
	var wg sync.WaitGroup
	for _, c := range s.List() {
		if c.Dead() {
			continue
		}
		wg.Go(func() {
			// The ping's deadline is on the agent's clock, like the
			// interval: a launcher is hung when PingTimeout passed on
			// that clock without an answer.
			pctx, cancel := context.WithCancel(ctx)
			defer cancel()
			timeout := s.opts.Clock.AfterFunc(s.opts.PingTimeout, cancel)
			defer timeout.Stop()
			if err := c.Client.Ping(pctx); err != nil && ctx.Err() == nil {
				s.MarkDead(c, fmt.Errorf("ping: %w", err))
			}
		})
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
