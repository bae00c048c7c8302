package ceph

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/proc"
)

// rgwID is the radosgw instance's name: client.rgw.a.
const rgwID = "rgw.a"

// DefaultRGWPort is where the radosgw listens (radosgw's own default).
// The port is in the cluster's namespace, which holds nothing else but
// the mon and the OSD (3300, 6789, 6800-7300), and a cluster has one
// radosgw: no other process, test or package competes for it, so no
// free-port search is needed (one in the host's namespace would say
// nothing about the cluster's).
const DefaultRGWPort = 7480

// RGWOptions say how the radosgw serves.
type RGWOptions struct {
	// Port in the cluster's namespace (default DefaultRGWPort).
	Port int
	// HTTP serves plain HTTP instead of HTTPS. By default the radosgw
	// serves HTTPS (beast's ssl_endpoint) with a certificate for its
	// address from a CA made for it (RGW.CACertPEM), as production S3
	// is reached; plain HTTP is for measuring what TLS costs.
	HTTP bool
}

// RGW is a cluster's radosgw: an S3 endpoint on the cluster's address.
type RGW struct {
	// Endpoint is https://addr:port (http:// with RGWOptions.HTTP),
	// reachable from every namespace that reaches the cluster (the
	// host's through a hub's host link).
	Endpoint string
	// CACertPEM is the CA its certificate is signed by (HTTPS only).
	CACertPEM []byte
	// Started is how long StartRGW took, to the first answered request.
	Started time.Duration

	c *Cluster
	p *proc.Proc
}

// S3User is an S3 user's keys. Keep them out of logs and command lines.
type S3User struct {
	UID       string
	AccessKey string
	SecretKey string
}

// RGW starts the cluster's radosgw on the first call (with opts; log
// gets how long it took) and returns it on every call; a later call with
// other options is an error.
// It costs a few seconds and a process (measured in the package doc), so
// only the tests that need S3 start it.
func (c *Cluster) RGW(ctx context.Context, opts RGWOptions, log Logger) (*RGW, error) {
	c.rgwMu.Lock()
	defer c.rgwMu.Unlock()
	if c.rgw != nil {
		if c.rgwOpts != opts {
			return nil, fmt.Errorf("ceph: the cluster's radosgw runs with %+v, not %+v", c.rgwOpts, opts)
		}
		return c.rgw, nil
	}
	if log == nil {
		log = discard{}
	}
	g, err := c.startRGW(ctx, opts, log)
	if err != nil {
		return nil, err
	}
	c.rgw, c.rgwOpts = g, opts
	return g, nil
}

func (c *Cluster) startRGW(ctx context.Context, opts RGWOptions, log Logger) (*RGW, error) {
	if _, err := os.Stat("/usr/bin/radosgw"); err != nil {
		return nil, fmt.Errorf("ceph: radosgw not installed (Debian package radosgw; scripts/install-deps.sh test): %w", err)
	}
	if opts.Port == 0 {
		opts.Port = DefaultRGWPort
	}
	if opts.Port < 1 || opts.Port > 65535 {
		return nil, fmt.Errorf("ceph: RGWOptions.Port %d", opts.Port)
	}
	began := time.Now()
	dir := filepath.Join(c.opts.Dir, "rgw")
	for _, d := range []string{dir, filepath.Join(dir, "data")} {
		if err := os.Mkdir(d, 0o700); err != nil {
			return nil, fmt.Errorf("ceph: %w", err)
		}
	}
	// Its key, in the keyring file the conf names for client.rgw.a
	// ($cluster.$name.keyring), 0600: never on a command line.
	key, err := c.CreateUser(ctx, rgwID, "mon", "allow rw", "osd", "allow rwx")
	if err != nil {
		return nil, err
	}
	keyring := filepath.Join(c.opts.Dir, "ceph.client."+rgwID+".keyring")
	if err := os.WriteFile(keyring, []byte("[client."+rgwID+"]\n\tkey = "+key+"\n"), 0o600); err != nil {
		return nil, err
	}
	hostPort := net.JoinHostPort(c.opts.Addr, strconv.Itoa(opts.Port))
	g := &RGW{c: c, Endpoint: "http://" + hostPort}
	frontend := "beast endpoint=" + hostPort
	if !opts.HTTP {
		certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
		ca, err := writeServerCert(c.opts.Addr, certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("ceph: radosgw certificate: %w", err)
		}
		g.Endpoint, g.CACertPEM = "https://"+hostPort, ca
		frontend = "beast ssl_endpoint=" + hostPort + " ssl_certificate=" + certFile + " ssl_private_key=" + keyFile
	}
	p, err := proc.Start(proc.DiesWithParent, "radosgw", filepath.Join(c.opts.Dir, "log", "radosgw.out"), "nsenter",
		"--net="+netnsPath(c.opts.NetNS), "--", "radosgw", "-f", "-c", c.conf, "-n", "client."+rgwID,
		"--rgw-frontends", frontend,
		"--rgw-data", filepath.Join(dir, "data"),
		// 512 threads by default; a test's requests need a few.
		"--rgw-thread-pool-size", "16",
	)
	if err != nil {
		return nil, err
	}
	g.p = p
	if err := g.waitServing(ctx); err != nil {
		err = fmt.Errorf("ceph: radosgw at %s: %w%s", g.Endpoint, err, g.logTail())
		return nil, errors.Join(err, p.Stop(stopGrace))
	}
	g.Started = time.Since(began)
	log.Logf("ceph: radosgw up in %s at %s", g.Started.Round(time.Millisecond), g.Endpoint)
	return g, nil
}

// waitServing polls the endpoint until radosgw answers (an anonymous
// GET / is a bucket listing), or it exits, or ctx ends.
func (g *RGW) waitServing(ctx context.Context) error {
	client := g.HTTPClient()
	client.Timeout = 2 * time.Second
	exited := waitCh(g.p)
	var last error
	err := wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		select {
		case <-exited:
			return false, fmt.Errorf("radosgw exited: %v", g.p.Wait())
		default:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.Endpoint+"/", nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("%w (last: %v)", err, last)
	}
	return err
}

// HTTPClient is a client that trusts the radosgw's CA.
func (g *RGW) HTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if g.CACertPEM != nil {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(g.CACertPEM)
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr}
}

// CreateUser makes S3 user uid (radosgw-admin user create) and returns
// its keys, which radosgw-admin generates and prints: they never pass a
// command line.
func (g *RGW) CreateUser(ctx context.Context, uid string) (S3User, error) {
	if err := checkName("S3 user", uid); err != nil {
		return S3User{}, err
	}
	out, err := g.c.Admin(ctx, "radosgw-admin", "user", "create", "--uid", uid, "--display-name", uid)
	if err != nil {
		return S3User{}, err
	}
	var u struct {
		Keys []struct {
			User      string `json:"user"`
			AccessKey string `json:"access_key"`
			SecretKey string `json:"secret_key"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(out, &u); err != nil {
		return S3User{}, fmt.Errorf("ceph: radosgw-admin user create %s: %w (%d bytes of output)", uid, err, len(out))
	}
	for _, k := range u.Keys {
		if k.User == uid && k.AccessKey != "" && k.SecretKey != "" {
			return S3User{UID: uid, AccessKey: k.AccessKey, SecretKey: k.SecretKey}, nil
		}
	}
	return S3User{}, fmt.Errorf("ceph: radosgw-admin user create %s: no S3 key in its output", uid)
}

// RSSBytes is the radosgw's resident memory now.
func (g *RGW) RSSBytes() (int64, error) {
	st, err := procfs.ProcStatus(g.p.Pid(), "VmRSS")
	if err != nil {
		return 0, err
	}
	return st["VmRSS"] * 1024, nil
}

// Pid is the radosgw's process.
func (g *RGW) Pid() int { return g.p.Pid() }

func (g *RGW) stop() error {
	if g == nil {
		return nil
	}
	return g.p.Stop(stopGrace)
}

func (g *RGW) logTail() string {
	var out string
	for _, name := range []string{"radosgw.out", "ceph-client." + rgwID + ".log"} {
		data, err := os.ReadFile(filepath.Join(g.c.opts.Dir, "log", name))
		if err == nil && len(data) > 0 {
			out += fmt.Sprintf("\n--- %s (end)\n%s", name, tailString(data, 3000))
		}
	}
	return out
}

// writeServerCert makes a CA and a certificate for addr signed by it,
// writes the certificate and its key (0600) and returns the CA's PEM.
// The CA's key is thrown away: nothing else is ever signed with it.
func writeServerCert(addr, certFile, keyFile string) ([]byte, error) {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "virtplane test radosgw CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: addr},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(7 * 24 * time.Hour),
		IPAddresses: []net.IP{ip.AsSlice()}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), nil
}
