package cluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/etcdserver"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/multinode"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/proc"
)

// Server is one `serve --role server` process of the control plane.
type Server struct {
	Index   int
	Name    string // its etcd member name with embedded members: s0, s1, ...
	DataDir string
	Socket  string // its unix socket
	TLSAddr string // its TLS listener (127.0.0.1:port), kept across restarts
	PeerURL string // its embedded etcd member's peer URL; "" when alone or external
	Proc    *proc.Proc
	// API is a client of this server over Socket.
	API    *client.Client
	Starts int

	args []string // the flags of every start; --listen is added once known
}

// Alive reports whether the server process runs.
func (s *Server) Alive() bool { return s.Proc.Alive() }

// Kill SIGKILLs the server and waits until it is gone.
func (s *Server) Kill() error { return s.Proc.Kill() }

// DefaultEtcdPrefix is the servers' --etcd-prefix.
const DefaultEtcdPrefix = "/virtplane"

// startServers starts Options.Servers servers one after the other: the
// first makes the PKI; the others get a copy of its pki dir, as an
// operator copies it, and with embedded members each joins through
// `store member add` and the flags it prints.
func (c *Cluster) startServers(ctx context.Context) error {
	for range max(c.opts.Servers, 1) {
		if _, err := c.AddServer(ctx); err != nil {
			return err
		}
	}
	c.API = c.Servers[0].API
	return nil
}

// AddServer starts one more server: with embedded members (Options.Servers
// above one), its member is added through a live server first, as when a
// dead server is replaced. It returns once the server serves.
func (c *Cluster) AddServer(ctx context.Context) (*Server, error) {
	i := len(c.Servers)
	s := &Server{Index: i, Name: "s" + strconv.Itoa(i),
		DataDir: filepath.Join(c.Dir, "server"), Socket: filepath.Join(c.Dir, "api.sock")}
	if i > 0 {
		s.DataDir = filepath.Join(c.Dir, "server-"+strconv.Itoa(i))
		s.Socket = filepath.Join(c.Dir, "api-"+strconv.Itoa(i)+".sock")
	}
	s.args = c.serverArgs(s)
	if c.opts.Servers > 1 && !c.opts.ExternalEtcd {
		addr, err := proc.FreeAddr("tcp")
		if err != nil {
			return nil, err
		}
		s.PeerURL = "https://" + addr.String()
		s.args = append(s.args, "--etcd-name", s.Name, "--etcd-peer-listen", s.PeerURL)
	}
	if i > 0 {
		if err := copyDir(filepath.Join(c.Servers[0].DataDir, "pki"), filepath.Join(s.DataDir, "pki")); err != nil {
			return nil, fmt.Errorf("copying the first server's pki: %w", err)
		}
		if s.PeerURL != "" {
			initial, err := c.addMember(ctx, s)
			if err != nil {
				return nil, err
			}
			s.args = append(s.args, "--etcd-initial-cluster", initial, "--etcd-initial-cluster-state", "existing")
		}
	}
	c.Servers = append(c.Servers, s)
	if err := c.StartServer(ctx, s); err != nil {
		return nil, err
	}
	var err error
	if s.API, err = client.Dial(ctx, client.Config{Endpoint: "unix://" + s.Socket}); err != nil {
		return nil, err
	}
	return s, nil
}

// serverArgs are the flags every server of the cluster starts with.
func (c *Cluster) serverArgs(s *Server) []string {
	args := []string{"serve", "--role", "server",
		"--data-dir", s.DataDir, "--socket", s.Socket,
		"--metrics-listen", "", "--log-level", "debug",
		// The guests' bridge on every host: the host-resource policy
		// allows no bridge unless told.
		"--allowed-bridges", multinode.GuestBridge,
		// The hosts' libvirtds listen without TLS on their link-local
		// addresses in the run's private network (multinode): the
		// operator's choice of tcp, and the networks nodes register in.
		"--migration-transport", "tcp", "--migration-libvirt-port", strconv.Itoa(multinode.TCPPort),
		"--migration-networks", "169.254.0.0/16"}
	if c.opts.ServerImageDir != "" {
		args = append(args, "--image-dir", c.opts.ServerImageDir)
	}
	if c.opts.NodeLease > 0 {
		args = append(args, "--node-lease", c.opts.NodeLease.String())
	}
	if c.opts.Heartbeat > 0 {
		args = append(args, "--heartbeat-interval", c.opts.Heartbeat.String())
	}
	if len(c.Etcd) > 0 {
		p := c.etcdPKI()
		args = append(args, "--etcd-endpoints", strings.Join(c.EtcdEndpoints(), ","),
			"--etcd-ca-file", p.CACert, "--etcd-cert-file", p.ClientCert, "--etcd-key-file", p.ClientKey)
	}
	return append(args, c.opts.ServerArgs...)
}

var reInitialCluster = regexp.MustCompile(`--etcd-initial-cluster (\S+)`)

// addMember adds s's member through the first live server with the CLI,
// as an operator does, and returns the initial cluster it printed.
func (c *Cluster) addMember(ctx context.Context, s *Server) (string, error) {
	from := c.LiveServer()
	if from == nil {
		return "", errors.New("no live server to add a member through")
	}
	out, err := exec.CommandContext(ctx, c.opts.Agent, "store", "member", "add", s.Name,
		"--peer-url", s.PeerURL, "--data-dir", from.DataDir).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("store member add %s: %w: %s", s.Name, err, out)
	}
	m := reInitialCluster.FindSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("store member add printed no --etcd-initial-cluster:\n%s", out)
	}
	return string(m[1]), nil
}

// StartServer starts s (again, after a kill: on the TLS address it had,
// which the node agents list) and waits until it logs that it started.
// Each start logs to a file of its own.
func (c *Cluster) StartServer(ctx context.Context, s *Server) error {
	log := filepath.Join(c.Dir, "server.log")
	if s.Index > 0 {
		log = filepath.Join(c.Dir, fmt.Sprintf("server-%d.log", s.Index))
	}
	if s.Starts > 0 {
		log = strings.TrimSuffix(log, ".log") + fmt.Sprintf("-restart%d.log", s.Starts)
	}
	s.Starts++
	listen := "127.0.0.1:0" // clusters run at once; the log says which port it got
	if s.TLSAddr != "" {
		listen = s.TLSAddr
	}
	var err error
	if s.Proc, err = proc.Start(proc.DiesWithParent, "server "+s.Name, log, c.opts.Agent, append(s.args, "--listen", listen)...); err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, pollInterval, c.opts.JoinTimeout, true, func(context.Context) (bool, error) {
		b, _ := os.ReadFile(log)
		if m := reAgentStarted.FindSubmatch(b); m != nil {
			s.TLSAddr = string(m[1])
			return true, nil
		}
		if !s.Proc.Alive() {
			return false, fmt.Errorf("server %s exited: %s", s.Name, multinode.TailFile(log, 4000))
		}
		return false, nil
	})
}

// ServerEndpoints is the servers' TLS endpoints as a list for --server,
// VIRTPLANE_ENDPOINT and the provider.
func (c *Cluster) ServerEndpoints() []string {
	var eps []string
	for _, s := range c.Servers {
		eps = append(eps, "https://"+s.TLSAddr)
	}
	return eps
}

// LiveServer is the first server whose process runs, or nil.
func (c *Cluster) LiveServer() *Server {
	for _, s := range c.Servers {
		if s.Alive() {
			return s
		}
	}
	return nil
}

// liveAPI is a live server's client; the first server's when none lives
// (its calls then fail, saying why).
func (c *Cluster) liveAPI() *client.Client {
	if s := c.LiveServer(); s != nil {
		return s.API
	}
	return c.API
}

// Leader is the server whose controllers run: the holder of the oldest
// key under the election prefix (etcd's election order), matched by the
// pid in its identity (<node name>/<pid>). It asks etcd through a live
// member; nil (no error) while no server leads.
func (c *Cluster) Leader(ctx context.Context) (*Server, error) {
	cli, err := c.EtcdClient(ctx)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	resp, err := cli.Get(clientv3.WithRequireLeader(ctx), DefaultEtcdPrefix+"/leader/", clientv3.WithFirstCreate()...)
	if err != nil {
		return nil, fmt.Errorf("reading the election: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	identity := string(resp.Kvs[0].Value)
	for _, s := range c.Servers {
		if s.Alive() && strings.HasSuffix(identity, "/"+strconv.Itoa(s.Proc.Pid())) {
			return s, nil
		}
	}
	// A dead server's key, until its lease runs out.
	return nil, nil
}

// RaftLeader is the server whose embedded member leads etcd's raft, or
// nil when none of the live ones does (an external cluster, or an
// election under way).
func (c *Cluster) RaftLeader(ctx context.Context) (*Server, error) {
	for _, s := range c.Servers {
		if !s.Alive() || len(c.Etcd) > 0 {
			continue
		}
		ep := s.memberEndpoint()
		cli, err := etcdserver.Connect(ctx, []string{ep}, nil)
		if err != nil {
			return nil, err
		}
		st, err := cli.Status(ctx, ep)
		cli.Close()
		if err != nil {
			return nil, err
		}
		if st.Leader == st.Header.MemberId {
			return s, nil
		}
	}
	return nil, nil
}

// EtcdClient reaches the store: an embedded member's socket of a live
// server, or the external cluster with the operator certificate. Tests
// use it to write what no API call may (a compromised store, old data);
// the caller closes it.
func (c *Cluster) EtcdClient(ctx context.Context) (*clientv3.Client, error) {
	if len(c.Etcd) > 0 {
		tlsCfg, err := c.etcdClientTLS()
		if err != nil {
			return nil, err
		}
		return etcdserver.Connect(ctx, c.EtcdEndpoints(), tlsCfg)
	}
	s := c.LiveServer()
	if s == nil {
		return nil, errors.New("no live server: no embedded etcd member to ask")
	}
	return etcdserver.Connect(ctx, []string{s.memberEndpoint()}, nil)
}

// memberEndpoint is the client socket of s's embedded etcd member.
func (s *Server) memberEndpoint() string {
	return "unix://" + filepath.Join(s.DataDir, etcdserver.DirName, etcdserver.SocketName)
}

// etcdPKI is where the external cluster's certificates are.
func (c *Cluster) etcdPKI() pki.EtcdPaths { return pki.EtcdPathsIn(filepath.Join(c.Dir, "etcd-pki")) }

// copyDir copies the regular files and dirs under src to dst, with
// their modes (keys stay 0600 in 0700 dirs).
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			if err := os.MkdirAll(target, info.Mode().Perm()); err != nil {
				return err
			}
			return os.Chmod(target, info.Mode().Perm())
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, info.Mode().Perm())
	})
}
