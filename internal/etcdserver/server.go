// Package etcdserver runs the embedded etcd member that stores
// virtplane's API objects (alone, or one of a cluster of embedded members
// on several server hosts), and connects to an external etcd cluster.
package etcdserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// SocketName is the client socket the embedded server listens on inside
// its data dir, e.g. for backups (SaveSnapshot, or etcdctl):
//
//	etcdctl --endpoints unix://<data-dir>/etcd/etcd.sock snapshot save backup.db
const SocketName = "etcd.sock"

// DirName is the embedded etcd's directory inside the agent's data dir
// (Config.DataDir is <data-dir>/DirName).
const DirName = "etcd"

// DefaultName is the member name when Config.Name is empty.
const DefaultName = "virtplane"

// PeerURL is the single member's advertised peer URL. It is never dialed
// but is part of the member ID, so a restored data dir must carry it too.
const PeerURL = "unix://virtplane-peer"

// ClusterToken is the initial cluster token of a member called name; like
// PeerURL it feeds the member and cluster IDs.
func ClusterToken(name string) string { return "virtplane-" + name }

// memberName is cfg.Name or DefaultName.
func (cfg Config) memberName() string {
	if cfg.Name == "" {
		return DefaultName
	}
	return cfg.Name
}

// maxSocketPath is what fits in sockaddr_un.sun_path with its NUL.
const maxSocketPath = 107

// DefaultReadyTimeout bounds how long Start waits for the member to become
// ready (WAL replay on a big data dir can take a while).
const DefaultReadyTimeout = 60 * time.Second

// Config configures the embedded server.
type Config struct {
	// DataDir holds etcd's data and its client socket. Required. Unix
	// socket paths are limited to ~107 bytes, so keep it short.
	DataDir string
	// Name of the member; "virtplane" when empty.
	Name string
	// ClientURLs are extra client listeners, "https://127.0.0.1:2379" or
	// "unixs:///path", served with ClientTLS and client-certificate auth.
	// Plain http:// and unix:// are refused: etcd has no other access
	// check, so they would hand the whole store (cloud-init user data
	// included) to whoever reaches them. The unix socket DataDir/etcd.sock
	// is always served, plain, inside the 0700 data dir.
	ClientURLs []string
	// ClientTLS is required with ClientURLs.
	ClientTLS *ClientTLS
	// QuotaBackendBytes is the backend size at which etcd raises its
	// NOSPACE alarm and refuses every write, heartbeats included, until an
	// operator compacts, defragments and disarms it; DefaultQuotaBytes
	// when 0.
	QuotaBackendBytes int64
	// AutoCompactionRetention, when > 0, compacts history older than this
	// periodically. Off by default: watchers resuming from an old revision
	// then never need a re-list.
	AutoCompactionRetention time.Duration
	// Peer, when set, makes this member one of a cluster of embedded
	// members; without it the member runs alone and listens for no peers.
	Peer *Peer
	// ReadyTimeout bounds the start of a member alone (default
	// DefaultReadyTimeout); a member of a cluster waits for a majority.
	ReadyTimeout time.Duration
	// Logger receives etcd's warnings and errors; slog.Default() when nil.
	Logger *slog.Logger
}

// MaxRequestBytes is the largest write the embedded member takes (etcd's
// --max-request-bytes, left at its default; an external cluster's default
// is the same): no stored object is larger, so no request that carries
// one back need be.
const MaxRequestBytes int = embed.DefaultMaxRequestBytes

// DefaultQuotaBytes is the embedded member's storage quota unless
// Config.QuotaBackendBytes says otherwise (etcd's own default).
const DefaultQuotaBytes = 2 << 30

// ClientTLS are PEM files that secure the extra client listeners: the
// server's certificate and key, and the CA whose client certificates are
// let in (pki.EnsureEtcd makes all three).
type ClientTLS struct {
	CertFile, KeyFile, ClientCAFile string
}

// Server is a running embedded etcd member.
type Server struct {
	etcd      *embed.Etcd
	client    *clientv3.Client
	socket    string
	quota     int64
	stopping  *atomic.Bool
	closeOnce sync.Once
}

// Start starts the member and waits until it serves requests. ctx only
// bounds the start; the server runs until Close.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("etcdserver: DataDir is required")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("etcdserver: %w", err)
	}
	dir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("etcdserver: data dir: %w", err)
	}
	// etcd warns about data dirs others can read; the dir is ours alone.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("etcdserver: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("etcdserver: %w", err)
	}
	// Say why rather than let bind fail with "invalid argument".
	if sock := filepath.Join(dir, SocketName); len(sock) > maxSocketPath {
		return nil, fmt.Errorf("etcdserver: socket path %s is longer than %d bytes; use a shorter data dir", sock, maxSocketPath)
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.Default()
	}
	stopping := new(atomic.Bool)
	ec, err := embedConfig(dir, cfg, lg, stopping)
	if err != nil {
		return nil, err
	}

	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("etcdserver: start in %s: %w", dir, err)
	}
	if err := waitReady(ctx, e, cfg, lg, stopping); err != nil {
		return nil, fmt.Errorf("etcdserver: start in %s: %w", dir, err)
	}
	sock := filepath.Join(dir, SocketName)
	cli, err := newClient([]string{"unix://" + sock}, nil, lg, stopping)
	if err != nil {
		stopping.Store(true)
		e.Close()
		return nil, fmt.Errorf("etcdserver: client of %s: %w", sock, err)
	}
	return &Server{etcd: e, client: cli, socket: sock, quota: ec.QuotaBackendBytes, stopping: stopping}, nil
}

// majorityLogInterval is how often a member of a cluster says that it
// still waits for a majority of members.
const majorityLogInterval = 15 * time.Second

// waitReady waits until the member serves (and, in a cluster, settled).
// A lone member gets cfg.ReadyTimeout. A member of a cluster waits for a
// majority of members as long as it takes, as etcd does: after a full
// outage the first server started must not give up before the operator
// starts the second; it says what it waits for meanwhile. On failure or
// ctx's end the member is stopped.
func waitReady(ctx context.Context, e *embed.Etcd, cfg Config, lg *slog.Logger, stopping *atomic.Bool) error {
	var timeout <-chan time.Time
	d := cfg.ReadyTimeout
	if d <= 0 {
		d = DefaultReadyTimeout
	}
	if cfg.Peer == nil {
		timer := time.NewTimer(d)
		defer timer.Stop()
		timeout = timer.C
	}
	var waiting <-chan time.Time // a member alone has no majority to wait for
	if cfg.Peer != nil {
		tick := time.NewTicker(majorityLogInterval)
		defer tick.Stop()
		waiting = tick.C
	}
	for {
		var err error
		select {
		case <-e.Server.ReadyNotify():
			if cfg.Peer == nil {
				return nil
			}
			if err = cfg.Peer.settle(ctx, e); err == nil {
				return nil
			}
		case err = <-e.Err():
		case <-timeout:
			err = fmt.Errorf("not ready after %s", d)
		case <-ctx.Done():
			err = ctx.Err()
		case <-waiting:
			lg.Warn("waiting for a majority of the etcd cluster's members to start (a member serves only with a majority)",
				"initial_cluster", cfg.Peer.InitialCluster)
			continue
		}
		abort(e, stopping)
		return err
	}
}

// abort stops a member that may never have become ready. embed's Close
// alone waits for the client listeners, which start serving only once the
// member is ready: a member still waiting for its peers would hang it.
// HardStop first ends that wait.
func abort(e *embed.Etcd, stopping *atomic.Bool) {
	stopping.Store(true)
	e.Server.HardStop()
	e.Close()
}

func embedConfig(dir string, cfg Config, lg *slog.Logger, stopping *atomic.Bool) (*embed.Config, error) {
	ec := embed.NewConfig()
	ec.Dir = dir
	ec.Name = cfg.memberName()

	if cfg.Peer != nil {
		if err := cfg.Peer.configure(ec); err != nil {
			return nil, err
		}
	} else {
		// A single member never receives peer traffic, so it gets no
		// peer listener at all (nothing to collide with when several
		// servers run side by side). The advertised URL only feeds the
		// member ID and is never dialed.
		peer, err := url.Parse(PeerURL)
		if err != nil {
			return nil, fmt.Errorf("etcdserver: peer URL: %w", err)
		}
		ec.ListenPeerUrls = nil
		ec.AdvertisePeerUrls = []url.URL{*peer}
		ec.InitialCluster = ec.Name + "=" + PeerURL
		ec.InitialClusterToken = ClusterToken(ec.Name)
	}

	extra, err := ExtraClientURLs(cfg.ClientURLs)
	if err != nil {
		return nil, fmt.Errorf("etcdserver: %w", err)
	}
	clientURLs := append([]url.URL{{Scheme: "unix", Path: filepath.Join(dir, SocketName)}}, extra...)
	ec.ListenClientUrls = clientURLs
	ec.AdvertiseClientUrls = clientURLs
	if len(extra) > 0 {
		t := cfg.ClientTLS
		if t == nil || t.CertFile == "" || t.KeyFile == "" || t.ClientCAFile == "" {
			return nil, errors.New("etcdserver: extra client URLs need ClientTLS (certificate, key and client CA)")
		}
		// Only the TLS listeners use it: etcd serves the unix socket
		// plain, as our own client expects.
		ec.ClientTLSInfo.CertFile = t.CertFile
		ec.ClientTLSInfo.KeyFile = t.KeyFile
		ec.ClientTLSInfo.TrustedCAFile = t.ClientCAFile
		ec.ClientTLSInfo.ClientCertAuth = true
	}
	ec.QuotaBackendBytes = cfg.QuotaBackendBytes
	if ec.QuotaBackendBytes <= 0 {
		ec.QuotaBackendBytes = DefaultQuotaBytes
	}

	// UnsafeNoFsync stays false: a write is acknowledged only once it is in
	// the fsynced WAL, so it survives SIGKILL and power loss.
	ec.UnsafeNoFsync = false

	if cfg.AutoCompactionRetention > 0 {
		ec.AutoCompactionMode = embed.CompactorModePeriodic
		ec.AutoCompactionRetention = cfg.AutoCompactionRetention.String()
	} else {
		ec.AutoCompactionRetention = "0"
	}

	ec.Logger = "zap"
	ec.LogLevel = "warn"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(
		zap.New(newSlogCore(lg.With("component", "etcd").Handler(), zap.WarnLevel, stopping)))
	return ec, nil
}

// ExtraClientURLs parses extra client listener URLs and refuses those
// etcd would serve without TLS and client-certificate auth.
func ExtraClientURLs(urls []string) ([]url.URL, error) {
	var out []url.URL
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("client URL %q: %w", s, err)
		}
		switch u.Scheme {
		case "https", "unixs":
		case "http", "unix":
			return nil, fmt.Errorf("client URL %q: %s:// serves etcd with no TLS and no authentication; use https:// (or unixs://), which requires a client certificate", s, u.Scheme)
		default:
			return nil, fmt.Errorf("client URL %q: unsupported scheme %q: use https:// or unixs://", s, u.Scheme)
		}
		out = append(out, *u)
	}
	return out, nil
}

// Client is the member's own client, connected through SocketPath like any
// other client. It is closed by Close.
//
// It is deliberately not etcd's in-process client (v3client), which saves
// the socket hop but pipes gRPC through in-memory streams: about 150
// watches cancelled at once deadlocked it for good, so controllers stopped
// and Close hung (TestWatchStorm). A real client has gRPC's flow control
// and the server's own stream handling between the two ends.
func (s *Server) Client() *clientv3.Client { return s.client }

// SocketPath is the unix socket the member serves in its data dir: its own
// Client and external tools (etcdctl, snapshots) connect there. The data
// dir is 0700, so only the agent's user reaches it.
func (s *Server) SocketPath() string { return s.socket }

// ExtraAddrs are the bound addresses of the ClientURLs listeners (a port 0
// there is the port the system chose), in no particular order.
func (s *Server) ExtraAddrs() []net.Addr {
	var out []net.Addr
	for _, l := range s.etcd.Clients {
		if a := l.Addr(); a.String() != s.socket && a.Network() != "unix" {
			out = append(out, a)
		}
	}
	return out
}

// Quota is the member's storage quota in bytes.
func (s *Server) Quota() int64 { return s.quota }

// Err reports a fatal server error after Start; it is closed when the
// server stops.
func (s *Server) Err() <-chan error { return s.etcd.Err() }

// Close stops the server; acknowledged writes are on disk already.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.stopping.Store(true)
		s.client.Close()
		s.etcd.Close()
	})
	return nil
}
