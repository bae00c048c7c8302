// Package driver is the launcher's domain manager: the gRPC Launcher
// service over one libvirt domain. It talks to libvirt only through Conn,
// so its semantics (adoption, user pause, grace bookkeeping, self-fencing)
// are unit-tested with a fake; launcher/internal/virt is the libvirt side.
package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
)

// DefaultQEMUPidDir is where libvirtd's QEMU driver writes <name>.pid for
// qemu:///system (one definition, shared with the node agent).
const DefaultQEMUPidDir = launcher.DefaultQEMUPidDir

// Config describes the one domain a launcher manages.
type Config struct {
	DomainName string
	// VMIUID is the VMI the launcher was started for. Empty means the
	// first Sync decides.
	VMIUID string
	// QEMUPidDir defaults to DefaultQEMUPidDir.
	QEMUPidDir string
	Version    string
	Logger     *slog.Logger
	// Now is for tests.
	Now func() time.Time
	// Clock paces the interface address lookups, bounds a domain's start
	// and thaws a freeze no Thaw ended; the real clock when nil.
	Clock clock.WithTickerAndDelayedExecution
	// SetVLAN makes tap, on bridge in the network namespace of process
	// pid (QEMU), an access port of VLAN vid; SetAccessVLAN when nil.
	SetVLAN func(pid int, bridge, tap string, vid int) error
	// Neighbours reads the neighbour table of the network namespace of
	// process pid (QEMU), by MAC; ReadNeighbours when nil.
	Neighbours func(pid int) ([]GuestInterface, error)
}

// Driver implements launcherpb.LauncherServer.
type Driver struct {
	launcherpb.UnimplementedLauncherServer

	conn Conn
	cfg  Config
	log  *slog.Logger

	// mu serialises the operations that change the domain, so that two
	// RPCs never interleave their read-modify-write of state and metadata.
	mu  sync.Mutex
	uid string // guarded by mu

	subs  *broadcaster
	lease *watchdog
	// policy is the node failure policy last read from the domain.
	policy policyCache
	migs   migrations
	// incoming removes a receiving domain whose agent stopped renewing it
	// (Incoming's valid_for_millis).
	incoming *watchdog
	// thawer thaws a freeze that no Thaw ended in time (freeze.go).
	thawer *watchdog
	// unplug follows the disk unplugs asked of the guest (hotplug.go).
	unplug unplugs

	// ptyMu guards the serial pty cached for one QEMU process: it is
	// fixed while that process lives, and reading it costs a call for the
	// whole domain XML on every status.
	ptyMu  sync.Mutex
	ptyPid int32
	pty    string

	// netMu serialises applying the network (Sync, the event pump); net
	// is what to apply, from the last Sync or Incoming.
	netMu sync.Mutex
	net   *netSpec // guarded by netMu

	clock clock.WithTickerAndDelayedExecution
	addrs addresses
	// console copies an adopted domain's serial pty into its console log
	// (takeover.go).
	console consoleCopy

	done chan struct{}
	wg   sync.WaitGroup
}

// New returns a driver for cfg.DomainName and starts turning events into
// DomainEvent updates. Call Close to stop it.
func New(conn Conn, events <-chan Event, cfg Config) (*Driver, error) {
	if cfg.DomainName == "" {
		return nil, errors.New("driver: a domain name is required")
	}
	if cfg.QEMUPidDir == "" {
		cfg.QEMUPidDir = DefaultQEMUPidDir
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.SetVLAN == nil {
		cfg.SetVLAN = SetAccessVLAN
	}
	if cfg.Neighbours == nil {
		cfg.Neighbours = ReadNeighbours
	}
	d := &Driver{
		conn:  conn,
		cfg:   cfg,
		log:   cfg.Logger.With("domain", cfg.DomainName),
		uid:   cfg.VMIUID,
		subs:  newBroadcaster(),
		clock: cfg.Clock,
		addrs: addresses{kick: make(chan struct{}, 1)},
		done:  make(chan struct{}),
	}
	// The lease and incoming watchdogs keep real time (their tests run
	// in synctest bubbles); the thaw timer runs on the injected clock.
	d.lease = newWatchdog(clock.RealClock{}, d.fence)
	d.incoming = newWatchdog(clock.RealClock{}, d.dropIncoming)
	d.thawer = newWatchdog(d.clock, d.thawNow)
	d.wg.Add(2)
	go d.pump(events)
	go d.watchAddresses()
	return d, nil
}

// Close stops the event pump and the lease watchdog and ends all Events
// streams. It does not touch the domain: libvirtd keeps it running.
func (d *Driver) Close() {
	select {
	case <-d.done:
		return
	default:
	}
	close(d.done)
	d.lease.stop()
	d.incoming.stop()
	d.thawer.stop()
	d.console.stop()
	d.subs.close()
	d.wg.Wait()
}

// lookup returns the domain, or nil when it does not exist.
func (d *Driver) lookup() (Domain, error) {
	dom, err := d.conn.LookupDomainByName(d.cfg.DomainName)
	if errors.Is(err, ErrNoDomain) {
		return nil, nil
	}
	if err != nil {
		return nil, grpcError(fmt.Errorf("look up domain %s: %w", d.cfg.DomainName, err))
	}
	return dom, nil
}

// readMetadata returns the domain's virtplane metadata; ok is false when
// it has none (a domain virtplane did not define).
func readMetadata(dom Domain) (md domxml.Metadata, ok bool, err error) {
	s, err := dom.GetMetadata(domxml.Namespace)
	if errors.Is(err, ErrNoMetadata) {
		return domxml.Metadata{}, false, nil
	}
	if err != nil {
		return domxml.Metadata{}, false, fmt.Errorf("read domain metadata: %w", err)
	}
	md, err = domxml.ParseMetadata(s)
	if err != nil {
		return domxml.Metadata{}, false, err
	}
	return md, true, nil
}

func writeMetadata(dom Domain, md domxml.Metadata) error {
	s, err := md.MarshalElement()
	if err != nil {
		return err
	}
	if err := dom.SetMetadata(s, domxml.NamespacePrefix, domxml.Namespace); err != nil {
		return fmt.Errorf("write domain metadata: %w", err)
	}
	return nil
}

// owned checks that dom belongs to this launcher's VMI. A same-name domain
// of another VMI (a stale instance) must never be driven by this one.
func (d *Driver) owned(dom Domain) (domxml.Metadata, error) {
	md, ok, err := readMetadata(dom)
	if err != nil {
		return md, grpcError(err)
	}
	if !ok {
		return md, status.Errorf(codes.FailedPrecondition, "domain %s is not managed by virtplane (no metadata in %s)", d.cfg.DomainName, domxml.Namespace)
	}
	if d.uid != "" && md.UID != d.uid {
		return md, status.Errorf(codes.FailedPrecondition, "domain %s belongs to VMI uid %s", d.cfg.DomainName, md.UID)
	}
	return md, nil
}

// statusOf reads the full DomainStatus of dom.
func (d *Driver) statusOf(dom Domain) (*launcherpb.DomainStatus, error) {
	st, reason, err := dom.GetState()
	if err != nil {
		return nil, grpcError(fmt.Errorf("get domain state: %w", err))
	}
	uuid, err := dom.GetUUIDString()
	if err != nil {
		return nil, grpcError(fmt.Errorf("get domain uuid: %w", err))
	}
	md, _, err := readMetadata(dom)
	if err != nil {
		return nil, grpcError(err)
	}
	s := &launcherpb.DomainStatus{
		Exists:              true,
		State:               st.String(),
		Reason:              ReasonName(st, reason),
		Uuid:                uuid,
		Name:                d.cfg.DomainName,
		VmiUid:              md.UID,
		PausedByUser:        md.PausedByUser,
		ShutdownRequestedAt: md.ShutdownRequestedAt,
	}
	if st.Active() {
		s.QemuPid = int32(d.qemuPid())
		s.ConsolePty = d.consolePty(dom, s.QemuPid)
		s.Interfaces, s.GuestAgentConnected = d.reportedAddresses()
	}
	return s, nil
}

// consolePty is the serial pty of the running dom, for console input; ""
// when the live XML does not tell (the status is no less valid for it).
func (d *Driver) consolePty(dom Domain, qemuPid int32) string {
	d.ptyMu.Lock()
	defer d.ptyMu.Unlock()
	if qemuPid != 0 && qemuPid == d.ptyPid && d.pty != "" {
		return d.pty
	}
	x, err := dom.GetXMLDesc()
	if err == nil {
		var pty string
		if pty, err = domxml.SerialPty(x); err == nil {
			d.ptyPid, d.pty = qemuPid, pty
			return pty
		}
	}
	d.log.Warn("reading the serial pty from the live domain XML", "err", err)
	return ""
}

// currentStatus looks the domain up and reports it, or that it is absent.
func (d *Driver) currentStatus() (*launcherpb.DomainStatus, error) {
	return d.onDomain(d.statusOf)
}

// onDomain looks the domain up and returns what fn returns for it, or
// that it is absent.
func (d *Driver) onDomain(fn func(Domain) (*launcherpb.DomainStatus, error)) (*launcherpb.DomainStatus, error) {
	dom, err := d.lookup()
	if err != nil {
		return nil, err
	}
	if dom == nil {
		return d.absent(), nil
	}
	defer dom.Free()
	return fn(dom)
}

// absent is the status of a domain that does not exist.
func (d *Driver) absent() *launcherpb.DomainStatus {
	return &launcherpb.DomainStatus{Exists: false, Name: d.cfg.DomainName}
}

func (d *Driver) qemuPid() int { return ReadQEMUPid(d.cfg.QEMUPidDir, d.cfg.DomainName) }

// ReadQEMUPid reads libvirtd's <dir>/<name>.pid; 0 when it cannot.
func ReadQEMUPid(dir, name string) int {
	b, err := os.ReadFile(filepath.Join(dir, name+".pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// GetDomain reports the domain, including a foreign VMI uid: the node
// agent uses that to spot a stale same-name domain.
func (d *Driver) GetDomain(ctx context.Context, _ *launcherpb.Empty) (*launcherpb.DomainStatus, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	return d.currentStatus()
}

// Ping answers liveness checks and tells the caller which process it
// reached (a reattach must find the same pid it stored).
func (d *Driver) Ping(context.Context, *launcherpb.Empty) (*launcherpb.PingResponse, error) {
	return &launcherpb.PingResponse{Version: d.cfg.Version, Pid: int32(os.Getpid())}, nil
}

// grpcError maps driver errors to gRPC codes the node agent can act on.
func grpcError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	switch {
	case errors.Is(err, ErrNotConnected):
		return status.Error(codes.Unavailable, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	// libvirt's own failures: Unknown with libvirt's message.
	return status.Error(codes.Unknown, err.Error())
}
