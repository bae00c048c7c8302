package launcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/hashicorp/go-plugin"
	"github.com/hashicorp/go-plugin/runner"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// Reattach connects to a running launcher from its Handle (Nomad's
// ReattachToExecutor). It checks the process first, so a dead launcher
// fails at once with ErrLauncherGone instead of a dial timeout.
func (m *manager) Reattach(ctx context.Context, h Handle) (Client, error) {
	if h.Version != HandleVersion {
		return nil, fmt.Errorf("reattach %s: handle version %d is not supported (want %d)", h.DomainName, h.Version, HandleVersion)
	}
	if h.Protocol != string(plugin.ProtocolGRPC) || h.Network != "unix" || h.Addr == "" || h.DomainName == "" {
		return nil, fmt.Errorf("reattach %s: incomplete handle (protocol %q, network %q, addr %q)", h.DomainName, h.Protocol, h.Network, h.Addr)
	}
	if h.ProtocolVersion != int(Handshake.ProtocolVersion) {
		return nil, fmt.Errorf("reattach %s: launcher speaks protocol %d, this agent %d", h.DomainName, h.ProtocolVersion, Handshake.ProtocolVersion)
	}
	if !processAlive(h.Pid) {
		return nil, fmt.Errorf("reattach %s: pid %d: %w", h.DomainName, h.Pid, ErrLauncherGone)
	}
	if !processIsLauncherFor(h.Pid, h.DomainName) {
		return nil, fmt.Errorf("reattach %s: pid %d is not its launcher (pid reused): %w", h.DomainName, h.Pid, ErrLauncherGone)
	}
	if _, err := os.Stat(h.Addr); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("reattach %s: socket %s is gone: %w", h.DomainName, h.Addr, ErrLauncherGone)
	}

	ctx, cancel := context.WithTimeout(ctx, reattachPingTimeout)
	defer cancel()
	log := m.log.With("domain", h.DomainName, "vmi_uid", h.VMIUID)
	stdio, err := os.OpenFile(m.LogPath(h.DomainName), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		// The log file is a convenience; reattaching matters more.
		log.Warn("cannot open launcher log for stdio", "error", err)
		stdio = nil
	}
	ar := newAttachedRunner(h.Pid)
	cfg := &plugin.ClientConfig{
		HandshakeConfig: Handshake,
		Plugins:         PluginSet(nil),
		Reattach: &plugin.ReattachConfig{
			Protocol:        plugin.ProtocolGRPC,
			ProtocolVersion: h.ProtocolVersion,
			Addr:            &net.UnixAddr{Name: h.Addr, Net: "unix"},
			Pid:             h.Pid,
			ReattachFunc:    func() (runner.AttachedRunner, error) { return ar, nil },
		},
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Managed:          false,
		Logger:           HCLogger(log),
	}
	if stdio != nil {
		cfg.SyncStdout, cfg.SyncStderr = stdio, stdio
	}
	pc := plugin.NewClient(cfg)
	var closer io.Closer
	if stdio != nil {
		closer = stdio
	}
	// Never pc.Kill on failure: a launcher that is slow to answer must not
	// be killed by a reattach attempt.
	drop := func() {
		close(ar.detached)
		closeConn(pc)
		if closer != nil {
			_ = closer.Close()
		}
	}
	fail := func(err error) (Client, error) {
		drop()
		if !processAlive(h.Pid) {
			err = fmt.Errorf("%w (%v)", ErrLauncherGone, err)
		}
		return nil, fmt.Errorf("reattach %s: %w", h.DomainName, err)
	}
	rpc, err := dispense(ctx, pc, drop)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("reattach %s: %w", h.DomainName, err)
		}
		return fail(err)
	}
	c := m.newClient(pc, rpc, h.Pid, h.Addr, h.DomainName, ar, closer)
	p, err := c.ping(ctx)
	if err != nil {
		return fail(err)
	}
	if int(p.GetPid()) != h.Pid {
		return fail(fmt.Errorf("socket %s is served by pid %d, not %d", h.Addr, p.GetPid(), h.Pid))
	}
	log.Info("reattached to launcher", "pid", h.Pid, "addr", h.Addr)
	return c, nil
}

// dispense connects and returns the Launcher client, honouring ctx
// (go-plugin's Client() does not take one). If ctx ends first, abandon
// runs once the connection attempt finishes, to clean up what it made.
func dispense(ctx context.Context, pc *plugin.Client, abandon func()) (launcherpb.LauncherClient, error) {
	type result struct {
		rpc launcherpb.LauncherClient
		err error
	}
	ch := make(chan result, 1)
	go func() {
		proto, err := pc.Client()
		if err != nil {
			ch <- result{err: err}
			return
		}
		raw, err := proto.Dispense(PluginName)
		if err != nil {
			ch <- result{err: err}
			return
		}
		rpc, ok := raw.(launcherpb.LauncherClient)
		if !ok {
			ch <- result{err: fmt.Errorf("plugin %q is a %T", PluginName, raw)}
			return
		}
		ch <- result{rpc: rpc}
	}()
	select {
	case r := <-ch:
		return r.rpc, r.err
	case <-ctx.Done():
		go func() {
			<-ch
			abandon()
		}()
		return nil, ctx.Err()
	}
}

// closeConn closes the gRPC connection only. go-plugin's own Close (and
// Kill) would first call the plugin's controller Shutdown, which ends the
// launcher; closing the ClientConn directly leaves it running.
func closeConn(pc *plugin.Client) {
	proto, err := pc.Client()
	if err != nil {
		return
	}
	if gc, ok := proto.(*plugin.GRPCClient); ok && gc.Conn != nil {
		_ = gc.Conn.Close()
	}
}
