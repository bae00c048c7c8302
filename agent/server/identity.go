package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
)

// JoinOptions are what a host needs to join as a node.
type JoinOptions struct {
	// Server is the API's TLS endpoint (https://host:port).
	Server string
	// Token is a bootstrap token from `virtplane-agent token create`.
	Token string
	// CAHash pins the server's CA ("sha256:<hex>"); CAFile trusts a CA
	// file instead. One of them is required: a token sent to a server the
	// node cannot authenticate could be stolen.
	CAHash, CAFile string
	NodeName       string
	// DataDir is the agent's data dir; the identity goes to
	// <data-dir>/identity.
	DataDir string
}

// Join makes a key on this host, sends a certificate request with the
// bootstrap token and stores the signed certificate. The key never leaves
// the host.
func Join(ctx context.Context, o JoinOptions) (*pki.NodeIdentity, error) {
	if o.Token == "" {
		return nil, errors.New("--token: Required value: a bootstrap token from `virtplane-agent token create`")
	}
	if o.CAHash == "" && o.CAFile == "" {
		return nil, errors.New("--ca-cert-hash or --server-ca-file is required: without either the node cannot tell the server from an impostor it would send its token to")
	}
	if o.CAHash != "" && !strings.HasPrefix(o.CAHash, "sha256:") {
		return nil, fmt.Errorf("--ca-cert-hash %q: want sha256:<hex>", o.CAHash)
	}
	if !strings.HasPrefix(o.Server, "https://") && strings.Contains(o.Server, "://") {
		return nil, fmt.Errorf("--server %q: a node joins over TLS (https://host:port)", o.Server)
	}
	id := pki.IdentityDir(o.DataDir)
	nk, err := pki.NewNodeKey(o.NodeName)
	if err != nil {
		return nil, err
	}
	c, err := client.Dial(ctx, client.Config{Endpoint: o.Server, CAFile: o.CAFile, PinnedCA: o.CAHash})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	resp, err := c.Bootstrap.Join(ctx, &apiv1.JoinRequest{Token: o.Token, NodeName: o.NodeName, CsrPem: nk.CSRPEM})
	if err != nil {
		return nil, fmt.Errorf("joining as node %s: %w", o.NodeName, err)
	}
	if err := id.Write(nk.Key, resp.GetCertificatePem(), resp.GetCaPem()); err != nil {
		return nil, err
	}
	return &id, nil
}

// clientKeepalive pings the server when a connection is idle, so that a
// node notices a dead server (and the server a dead node) within a minute;
// not more often than the server's enforcement policy allows.
var clientKeepalive = grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 15 * time.Second, PermitWithoutStream: true})

// nodeClientConfig is how role node reaches the API: as its node, by the
// certificate it joined with (joining first when given a token), or over
// the local socket as its node.
func (a *Agent) nodeClientConfig(ctx context.Context) (client.Config, *pki.KeyPair, error) {
	o := a.opts
	cfg := o.Node.Server
	if cfg.Endpoint == "" || strings.HasPrefix(cfg.Endpoint, "unix://") || strings.HasPrefix(cfg.Endpoint, "/") {
		cfg.ActAsNode = o.NodeName
		return cfg, nil, nil
	}
	if cfg.Token != "" || cfg.TokenFile != "" {
		return cfg, nil, errors.New("--server-token-file: a node authenticates with its own certificate, never the admin token: join with `virtplane-agent node join` (or --join-token)")
	}
	id := pki.IdentityDir(o.DataDir)
	if !id.Exists() {
		if o.Node.JoinToken == "" {
			return cfg, nil, fmt.Errorf("node %s has not joined (no %s): run `virtplane-agent node join --server %s --token <token> --ca-cert-hash <hash>` or pass --join-token",
				o.NodeName, id.PairFile(), cfg.Endpoint)
		}
		if _, err := Join(ctx, JoinOptions{Server: cfg.Endpoint, Token: o.Node.JoinToken, CAHash: o.Node.JoinCAHash,
			CAFile: cfg.CAFile, NodeName: o.NodeName, DataDir: o.DataDir}); err != nil {
			return cfg, nil, err
		}
		a.log.Info("joined", "node", o.NodeName, "server", cfg.Endpoint)
	}
	kp, err := pki.LoadKeyPair(id.PairFile(), id.PairFile())
	if err != nil {
		return cfg, nil, fmt.Errorf("node identity: %w", err)
	}
	if name, _ := pki.NodeName(kp.Leaf()); name != o.NodeName {
		return cfg, nil, fmt.Errorf("node identity %s is for node %q, not --node-name %q", id.PairFile(), name, o.NodeName)
	}
	cfg.ClientCertificate = kp.GetClientCertificate
	if cfg.CAFile == "" {
		cfg.CAFile = id.CAFile()
	}
	cfg.DialOptions = append(cfg.DialOptions, clientKeepalive)
	return cfg, kp, nil
}

// renewer replaces a node's certificate at two thirds of its life, with a
// new key made on the node; connections opened afterwards present it.
type renewer struct {
	api   apiv1.BootstrapClient
	id    pki.NodeIdentity
	kp    *pki.KeyPair
	node  string
	clock clock.WithTicker
	log   *slog.Logger
}

const (
	renewRetryMin = 10 * time.Second
	renewRetryMax = 10 * time.Minute
)

func (r *renewer) run(ctx context.Context) {
	retry := renewRetryMin
	for {
		if at := pki.RenewAt(r.kp.Leaf()); r.clock.Now().Before(at) {
			retry = renewRetryMin
			if !r.sleep(ctx, at.Sub(r.clock.Now())) {
				return
			}
		}
		if err := r.renew(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			r.log.Error("renewing the node certificate failed; retrying", "err", err, "retry_in", retry, "expires", r.kp.Leaf().NotAfter)
			if !r.sleep(ctx, retry) {
				return
			}
			retry = min(retry*2, renewRetryMax)
		}
	}
}

// sleep waits d on the clock; false when ctx ended first.
func (r *renewer) sleep(ctx context.Context, d time.Duration) bool {
	t := r.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

func (r *renewer) renew(ctx context.Context) error {
	nk, err := pki.NewNodeKey(r.node)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := r.api.Renew(cctx, &apiv1.RenewRequest{CsrPem: nk.CSRPEM})
	if err != nil {
		return err
	}
	if err := r.id.Write(nk.Key, resp.GetCertificatePem(), resp.GetCaPem()); err != nil {
		return err
	}
	if _, err := r.kp.Reload(); err != nil {
		return err
	}
	r.log.Info("node certificate renewed", "serial", pki.SerialHex(r.kp.Leaf()), "not_after", r.kp.Leaf().NotAfter)
	return nil
}

// renewServerCert reissues the server's certificate when it nears expiry
// (pki.Ensure) and reloads its files, which an operator may also replace:
// the listener presents the current one on each new connection. It
// reloads the admin token file too (a rotated token takes effect within
// CertCheckInterval).
func (a *Agent) renewServerCert(ctx context.Context, paths pki.Paths, kp *pki.KeyPair, reloadToken func()) {
	every := a.opts.CertCheckInterval
	if every <= 0 {
		every = time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		reloadToken()
		// Ensure reissues a certificate that nears expiry; the names it
		// must hold do not change while the agent runs.
		if a.opts.TLSCertFile == "" && pki.RenewalDue(kp.Leaf(), time.Now()) {
			if err := pki.Ensure(paths, a.sans(), time.Now()); err != nil {
				a.log.Error("renewing the server certificate", "err", err)
				continue
			}
		}
		changed, err := kp.Reload()
		if err != nil {
			a.log.Error("reloading the server certificate", "err", err)
		} else if changed {
			a.log.Info("server certificate reloaded", "not_after", kp.Leaf().NotAfter)
		}
	}
}
