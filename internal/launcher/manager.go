package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-plugin"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

const (
	// DefaultLibvirtURI is libvirtd's system instance, which owns QEMU.
	DefaultLibvirtURI = "qemu:///system"
	// DefaultQEMUPidDir is where libvirtd's QEMU driver writes
	// <domain>.pid for qemu:///system, as seen from the launcher's mount
	// namespace. A libvirtd with a private /run/libvirt (the multi-node
	// test hosts) writes them elsewhere.
	DefaultQEMUPidDir = "/run/libvirt/qemu"
	// defaultStartTimeout bounds the plugin handshake when ctx has no
	// deadline.
	defaultStartTimeout = 30 * time.Second
	// reattachPingTimeout: a launcher that does not answer this fast is
	// treated as gone, so the node agent never hangs on a dead socket.
	reattachPingTimeout = 5 * time.Second
	// stopGrace is how long Stop waits for the process after killing it.
	stopGrace = 10 * time.Second
	// stopAskTimeout bounds the polite part of Stop (go-plugin asks the
	// launcher to exit over gRPC, then waits 2 s): a hung launcher never
	// answers, and Stop must end it by pid even when its ctx has no
	// deadline.
	stopAskTimeout = 5 * time.Second
)

// ManagerOptions configure NewManager.
type ManagerOptions struct {
	// LauncherPath is the virtplane-launcher binary.
	LauncherPath string
	// LibvirtURI defaults to DefaultLibvirtURI.
	LibvirtURI string
	// QEMUPidDir is where that libvirtd writes QEMU pid files; defaults
	// to DefaultQEMUPidDir. Launchers report the QEMU pid from it.
	QEMUPidDir string
	// LogDir receives one <domain>.log per launcher (its own log plus
	// anything go-plugin forwards). Defaults to $TMPDIR/virtplane-launcher.
	LogDir string
	// Logger receives the manager's and go-plugin's messages.
	Logger *slog.Logger
	// SocketDir, if set, is where launchers create their plugin sockets
	// (go-plugin uses $TMPDIR otherwise). It must outlive node-agent
	// restarts, e.g. /run/virtplane/launchers.
	SocketDir string
}

type manager struct {
	opts ManagerOptions
	log  *slog.Logger
	// askTimeout is stopAskTimeout; tests of a hung launcher shorten it.
	askTimeout time.Duration
}

// NewManager returns a Manager that starts launchers with opts.
func NewManager(opts ManagerOptions) Manager {
	if opts.LibvirtURI == "" {
		opts.LibvirtURI = DefaultLibvirtURI
	}
	if opts.QEMUPidDir == "" {
		opts.QEMUPidDir = DefaultQEMUPidDir
	}
	if opts.LogDir == "" {
		opts.LogDir = filepath.Join(os.TempDir(), "virtplane-launcher")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &manager{opts: opts, log: opts.Logger, askTimeout: stopAskTimeout}
}

// LogPath is the log file of the launcher for domainName.
func (m *manager) LogPath(domainName string) string {
	return filepath.Join(m.opts.LogDir, domainName+".log")
}

// lockPath is the flock that keeps a second launcher off the domain; it
// lives with the sockets when there is a socket dir (runtime state), with
// the logs otherwise.
func (m *manager) lockPath(domainName string) string {
	dir := m.opts.SocketDir
	if dir == "" {
		dir = m.opts.LogDir
	}
	return filepath.Join(dir, domainName+".lock")
}

func (m *manager) args(vmi *apiv1.VirtualMachineInstance, domainName string) []string {
	md := vmi.GetMetadata()
	args := []string{"serve",
		"--libvirt-uri", m.opts.LibvirtURI,
		"--qemu-pid-dir", m.opts.QEMUPidDir,
		"--domain-name", domainName,
		"--vmi-uid", md.GetUid(),
		"--vmi-key", md.GetNamespace() + "/" + md.GetName(),
		"--log-file", m.LogPath(domainName),
		"--lock-file", m.lockPath(domainName),
	}
	if m.opts.SocketDir != "" {
		args = append(args, "--socket-dir", m.opts.SocketDir)
	}
	return args
}

// Launch starts a launcher (Nomad's CreateExecutor): its own session, so
// signals sent to the node agent's process group never reach it; not
// managed by go-plugin's cleanup, so it outlives the node agent.
func (m *manager) Launch(ctx context.Context, vmi *apiv1.VirtualMachineInstance, domainName string) (Client, Handle, error) {
	uid := vmi.GetMetadata().GetUid()
	if uid == "" || domainName == "" {
		return nil, Handle{}, errors.New("launch: vmi uid and domain name are required")
	}
	if m.opts.LauncherPath == "" {
		return nil, Handle{}, errors.New("launch: no launcher binary configured")
	}
	if err := CheckQEMUPidDir(m.opts.QEMUPidDir); err != nil {
		return nil, Handle{}, fmt.Errorf("launch: %w", err)
	}
	if err := os.MkdirAll(m.opts.LogDir, 0o750); err != nil {
		return nil, Handle{}, fmt.Errorf("launch: create log dir: %w", err)
	}
	if m.opts.SocketDir != "" {
		if err := os.MkdirAll(m.opts.SocketDir, 0o700); err != nil {
			return nil, Handle{}, fmt.Errorf("launch: create socket dir: %w", err)
		}
	}
	logPath := m.LogPath(domainName)
	stdio, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, Handle{}, fmt.Errorf("launch: open launcher log: %w", err)
	}

	cmd := exec.Command(m.opts.LauncherPath, m.args(vmi, domainName)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	log := m.log.With("domain", domainName, "vmi_uid", uid)
	timeout := defaultStartTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Second)
	}
	pc := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig:  Handshake,
		Plugins:          PluginSet(nil),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		// Not managed: plugin.CleanupClients must never kill launchers.
		Managed: false,
		// Reattach cannot redo an mTLS handshake whose keys died with the
		// old agent; the unix socket is protected by its file mode.
		AutoMTLS:     false,
		StartTimeout: timeout,
		SyncStdout:   stdio,
		SyncStderr:   stdio,
		Logger:       HCLogger(log),
	})
	// A launcher that did not come up properly is ended, so a failed
	// Launch leaves nothing behind.
	kill := func() {
		pc.Kill()
		_ = stdio.Close()
	}
	fail := func(err error) (Client, Handle, error) {
		kill()
		return nil, Handle{}, fmt.Errorf("launch %s: %w%s", domainName, err, logTail(logPath))
	}

	rpc, err := dispense(ctx, pc, kill)
	if err != nil {
		if ctx.Err() != nil {
			return nil, Handle{}, fmt.Errorf("launch %s: %w", domainName, err)
		}
		return fail(err)
	}
	rc := pc.ReattachConfig()
	if rc == nil || rc.Addr == nil {
		return fail(errors.New("go-plugin returned no reattach config"))
	}
	c := m.newClient(pc, rpc, rc.Pid, rc.Addr.String(), domainName, nil, stdio)
	p, err := c.ping(ctx)
	if err != nil {
		return fail(err)
	}
	if int(p.GetPid()) != rc.Pid {
		return fail(fmt.Errorf("launcher answered from pid %d, started pid %d", p.GetPid(), rc.Pid))
	}
	h := Handle{
		Version:    HandleVersion,
		VMIUID:     uid,
		VMIKey:     vmi.GetMetadata().GetNamespace() + "/" + vmi.GetMetadata().GetName(),
		DomainName: domainName,
		Protocol:   string(rc.Protocol),
		// go-plugin's ReattachConfig leaves the version out for launched
		// plugins; the negotiated one is what reattach must check.
		ProtocolVersion: pc.NegotiatedVersion(),
		Network:         rc.Addr.Network(),
		Addr:            rc.Addr.String(),
		Pid:             rc.Pid,
	}
	// A domain left by an earlier launcher is already known: fill its UUID
	// now so the handle is complete even before the first Sync.
	if st, err := c.GetDomain(ctx); err == nil && st.GetExists() && st.GetVmiUid() == uid {
		h.DomainUUID = st.GetUuid()
	}
	log.Info("launcher started", "pid", rc.Pid, "addr", h.Addr, "launcher_version", p.GetVersion())
	return c, h, nil
}

func (m *manager) newClient(pc *plugin.Client, rpc launcherpb.LauncherClient, pid int, addr, domainName string, ar *attachedRunner, logFile io.Closer) *grpcClient {
	var once sync.Once
	release := func() {
		once.Do(func() {
			if ar != nil {
				close(ar.detached)
			}
			if logFile != nil {
				_ = logFile.Close()
			}
		})
	}
	detach := func() {
		closeConn(pc)
		release()
	}
	stop := func(ctx context.Context) error {
		err := m.stopLauncher(ctx, pc.Kill, pid, domainName)
		release()
		// The socket is normally unlinked by the launcher; not after SIGKILL.
		if rmErr := os.Remove(addr); rmErr == nil {
			m.log.Debug("removed stale launcher socket", "addr", addr)
		}
		if err != nil {
			return fmt.Errorf("stop launcher: %w", err)
		}
		return nil
	}
	return &grpcClient{rpc: rpc, detach: detach, stop: stop}
}

// stopLauncher ends the launcher pid. ask is go-plugin's Kill, which asks
// the launcher to exit (controller Shutdown), waits two seconds, then
// SIGKILLs it, and for a child also reaps it. A hung launcher never
// answers the request, so ask would block: after ctx or stopAskTimeout,
// whichever ends first, the launcher is killed by pid (checked to still be
// this domain's launcher), which also unblocks ask.
func (m *manager) stopLauncher(ctx context.Context, ask func(), pid int, domainName string) error {
	done := make(chan struct{})
	go func() {
		ask()
		close(done)
	}()
	t := time.NewTimer(m.askTimeout)
	defer t.Stop()
	select {
	case <-done:
	case <-ctx.Done():
	case <-t.C:
		m.log.Warn("launcher did not exit when asked; killing it", "pid", pid, "domain", domainName)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), stopGrace)
	defer cancel()
	if err := killLauncher(wctx, pid, domainName); err != nil && !errors.Is(err, errNotLauncher) {
		return err
	}
	return nil
}

// CheckQEMUPidDir accepts an absolute, clean path: the launcher joins
// domain names to it, and a relative one would depend on its working
// directory.
func CheckQEMUPidDir(dir string) error {
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir {
		return fmt.Errorf("qemu pid dir %q must be an absolute, clean path", dir)
	}
	return nil
}

// logTail returns the end of a launcher log for error messages: a launcher
// that fails at start says why there, not on the pipe go-plugin reads.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	const max = 2048
	if len(b) > max {
		b = b[len(b)-max:]
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return "; launcher log " + path + ":\n" + strings.Join(lines, "\n")
}
