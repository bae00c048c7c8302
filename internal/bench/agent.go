package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/proc"
)

// Agent roles, as `virtplane-agent serve --role` takes them.
const (
	RoleAll    = "all"
	RoleServer = "server"
	RoleNode   = "node"
)

// AgentConfig describes one `virtplane-agent serve` process. Every agent
// of a benchmark lives in a directory of its own.
type AgentConfig struct {
	Bin      string // virtplane-agent
	Launcher string // virtplane-launcher (roles all and node)
	Dir      string // data dir, socket and log go here
	Role     string
	// Roles all and node.
	NodeName   string
	LibvirtURI string
	ImageDir   string
	// Role node: the server's socket.
	Server string
	// Roles all and server: placement settings, passed only when set so
	// that the agent's defaults apply otherwise.
	MemoryOverhead     string // --vm-memory-overhead
	CPUAllocationRatio int    // --cpu-allocation-ratio
	// Extra flags, appended last.
	Extra []string
}

// Agent is a running agent process.
type Agent struct {
	*proc.Proc
	Cfg         AgentConfig
	Socket      string
	DataDir     string
	MetricsAddr string // "" for role node
}

// Args returns the command line flags of the agent cfg describes.
func (cfg AgentConfig) Args(metricsAddr string) []string {
	a := []string{"serve", "--role", cfg.Role,
		"--data-dir", filepath.Join(cfg.Dir, "data"),
		"--socket", filepath.Join(cfg.Dir, "api.sock"),
		"--log-format", "json",
	}
	if cfg.Role != RoleNode {
		a = append(a, "--metrics-listen", metricsAddr)
		if cfg.MemoryOverhead != "" {
			a = append(a, "--vm-memory-overhead", cfg.MemoryOverhead)
		}
		if cfg.CPUAllocationRatio > 0 {
			a = append(a, "--cpu-allocation-ratio", strconv.Itoa(cfg.CPUAllocationRatio))
		}
	}
	if cfg.Role != RoleServer {
		a = append(a, "--node-name", cfg.NodeName,
			"--libvirt-uri", cfg.LibvirtURI,
			"--launcher-path", cfg.Launcher,
			"--node-data-dir", filepath.Join(cfg.Dir, "node"),
			"--image-dir", cfg.ImageDir)
	}
	if cfg.Role == RoleNode {
		a = append(a, "--server", "unix://"+cfg.Server)
	}
	return append(a, cfg.Extra...)
}

// StartAgent starts the agent and waits until it serves: the API is up
// (roles all and server) and the node agent handles VMIs (roles all and
// node). The log is <dir>/agent-<n>.log, n counting starts in that
// directory.
func StartAgent(ctx context.Context, cfg AgentConfig) (*Agent, error) {
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("agent dir: %w", err)
	}
	var metrics string
	if cfg.Role != RoleNode {
		addr, err := proc.FreeAddr("tcp")
		if err != nil {
			return nil, err
		}
		metrics = addr.String()
	}
	logPath := nextLog(cfg.Dir)
	p, err := spawn(cfg, metrics, logPath)
	if err != nil {
		return nil, err
	}
	a := &Agent{Proc: p, Cfg: cfg, Socket: filepath.Join(cfg.Dir, "api.sock"),
		DataDir: filepath.Join(cfg.Dir, "data"), MetricsAddr: metrics}
	ready := []string{"agent started", "node agent running"}
	switch cfg.Role {
	case RoleServer:
		ready = ready[:1]
	case RoleNode:
		ready = ready[1:]
	}
	for _, msg := range ready {
		if _, err := WaitLog(ctx, p, msg, 2*time.Minute); err != nil {
			_ = p.Kill()
			return nil, err
		}
	}
	return a, nil
}

// Restart starts the same agent again (after Kill), with the same flags,
// logging to the next log file; it does not wait for readiness.
func (a *Agent) Restart() error {
	p, err := spawn(a.Cfg, a.MetricsAddr, nextLog(a.Cfg.Dir))
	if err != nil {
		return err
	}
	a.Proc = p
	return nil
}

// spawn starts the agent process. It gets a process group of its own, so
// that a Ctrl-C reaches only the benchmark, which then cleans up in
// order; messages name it by its binary.
func spawn(cfg AgentConfig, metricsAddr, logPath string) (*proc.Proc, error) {
	return proc.Start(proc.OwnGroup, cfg.Bin, logPath, cfg.Bin, cfg.Args(metricsAddr)...)
}

func nextLog(dir string) string {
	for n := 1; ; n++ {
		p := filepath.Join(dir, fmt.Sprintf("agent-%d.log", n))
		if _, err := os.Stat(p); os.IsNotExist(err) {
			return p
		}
	}
}

// Client connects to the agent's API socket.
func (a *Agent) Client(ctx context.Context) (*client.Client, error) {
	return client.Dial(ctx, client.Config{Endpoint: "unix://" + a.Socket})
}

// EtcdSocket is the embedded etcd's client socket.
func (a *Agent) EtcdSocket() string { return filepath.Join(a.DataDir, "etcd", "etcd.sock") }
