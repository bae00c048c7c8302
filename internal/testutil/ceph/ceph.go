package ceph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/proc"
)

// Options say where a cluster runs.
type Options struct {
	// Dir is the cluster's state: conf, keyrings, the mon's store, the
	// OSD's sparse block file, logs. Start makes it (0700; it must not
	// exist, its parent must) and Close removes it. QEMU needs nothing
	// in it: clients get the monitors and a key.
	Dir string
	// NetNS is the network namespace (a name under /run/netns) the
	// daemons and every command run in. Required.
	NetNS string
	// Addr is the IPv4 address the daemons bind in NetNS; it must be on
	// an interface there. Required.
	Addr string
	// Pool is the RBD pool Start makes (default "vp").
	Pool string
	// BlockSize is the OSD's BlueStore file (default 10 GiB, sparse: it
	// takes only what is written).
	BlockSize int64
	// Log gets what Start did and how long it took.
	Log Logger
}

// Logger is where the package reports what it did; a *testing.T is one,
// and so is multinode's.
type Logger interface {
	Logf(format string, args ...any)
}

// Cluster is a running mon and OSD.
type Cluster struct {
	opts Options
	conf string
	// Started is how long Start took, to a pool that takes I/O.
	Started time.Duration

	mon, osd *proc.Proc

	mu     sync.Mutex
	closed bool
	err    error // Close's

	rgwMu   sync.Mutex
	rgw     *RGW // started by the first RGW call (rgw.go)
	rgwOpts RGWOptions
}

// Timeouts of the daemons' stop: the mon exits at once on SIGTERM, the
// OSD within a few seconds.
const stopGrace = 20 * time.Second

// Start makes and starts a cluster and returns it once its pool takes
// I/O. ctx bounds the start; on failure what was made is removed and the
// error carries the end of the daemons' logs.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if err := opts.complete(); err != nil {
		return nil, err
	}
	if err := addrIn(ctx, opts.NetNS, opts.Addr); err != nil {
		return nil, err
	}
	if err := os.Mkdir(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("ceph: %w", err)
	}
	c := &Cluster{opts: opts, conf: filepath.Join(opts.Dir, "ceph.conf")}
	began := time.Now()
	if err := c.bootstrap(ctx); err != nil {
		err = fmt.Errorf("ceph: starting a cluster in %s at %s: %w%s", opts.NetNS, opts.Addr, err, c.logTails())
		return nil, errors.Join(err, c.Close())
	}
	c.Started = time.Since(began)
	opts.Log.Logf("ceph: cluster up in %s at %s (network namespace %s, pool %s, dir %s)",
		c.Started.Round(time.Millisecond), c.Monitors()[0], opts.NetNS, opts.Pool, opts.Dir)
	return c, nil
}

// Monitors are the addresses a client connects to: the mon's msgr2
// address (port 3300, which rbd -m, QEMU's server list and libvirt's
// <host> take without a prefix).
func (c *Cluster) Monitors() []string {
	return []string{fmt.Sprintf("%s:%d", c.opts.Addr, monPortV2)}
}

// Pool is the RBD pool Start made.
func (c *Cluster) Pool() string { return c.opts.Pool }

// Conf is the cluster's ceph.conf (the admin's: its keyring setting finds
// client.admin's key in Dir). Other clients need only the monitors and a
// key.
func (c *Cluster) Conf() string { return c.conf }

// NetNS is the network namespace the cluster runs in.
func (c *Cluster) NetNS() string { return c.opts.NetNS }

// Pids are the mon's and the OSD's processes (0 for one not started).
func (c *Cluster) Pids() (mon, osd int) { return c.mon.Pid(), c.osd.Pid() }

// Admin runs ceph, rbd or another Ceph CLI as client.admin (-c Conf) in
// the cluster's namespace and returns its standard output. The error
// quotes the command and its standard error, never its output (which may
// hold a key).
func (c *Cluster) Admin(ctx context.Context, name string, args ...string) ([]byte, error) {
	return c.exec(ctx, nil, name, append([]string{"-c", c.conf}, args...)...)
}

// Exec runs name with args in the cluster's namespace as they are: a CLI
// as another user (-m Monitors()[0] --id vp --keyfile F), qemu-img on an
// rbd: target, a reachability probe.
func (c *Cluster) Exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	return c.exec(ctx, nil, name, args...)
}

func (c *Cluster) exec(ctx context.Context, stdin io.Reader, name string, args ...string) ([]byte, error) {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return nil, fmt.Errorf("ceph: %s: the cluster is closed", name)
	}
	return inNetNS(ctx, c.opts.NetNS, stdin, name, args...)
}

// CreateUser makes client.name with caps (pairs: "mon", "profile rbd",
// "osd", "profile rbd pool=vp") if it does not exist, and returns its key.
// Write the key to a 0600 file for --keyfile: never put it on a command
// line.
func (c *Cluster) CreateUser(ctx context.Context, name string, caps ...string) (string, error) {
	if err := checkName("user", name); err != nil {
		return "", err
	}
	if len(caps)%2 != 0 {
		return "", fmt.Errorf("ceph: caps of client.%s: want pairs of service and capability, got %d strings", name, len(caps))
	}
	out, err := c.Admin(ctx, "ceph", append([]string{"auth", "get-or-create-key", "client." + name}, caps...)...)
	if err != nil {
		return "", err
	}
	key := strings.TrimSpace(string(out))
	if key == "" || strings.ContainsAny(key, " \n") {
		return "", fmt.Errorf("ceph: auth get-or-create-key client.%s: no single key in its output (%d bytes)", name, len(out))
	}
	return key, nil
}

// Blocklist is the cluster's blocklist: addresses as Ceph stores them
// ("169.254.7.2:0/0" for a whole host, "ip:port/nonce" for one client).
func (c *Cluster) Blocklist(ctx context.Context) ([]string, error) {
	out, err := c.Admin(ctx, "ceph", "osd", "blocklist", "ls", "--format", "json")
	if err != nil {
		return nil, err
	}
	var entries []struct {
		Addr string `json:"addr"`
	}
	// Pacific's CLI prints a second list after the entries (the range
	// blocklist, "[]"): the first JSON value is the one.
	if err := json.NewDecoder(bytes.NewReader(out)).Decode(&entries); err != nil {
		return nil, fmt.Errorf("ceph: osd blocklist ls: %w: %q", err, out)
	}
	addrs := make([]string, 0, len(entries))
	for _, e := range entries {
		addrs = append(addrs, e.Addr)
	}
	return addrs, nil
}

// CreatePool makes an RBD pool (size 1, 8 placement groups: the conf's
// defaults) and returns once it takes I/O; an existing one is fine.
func (c *Cluster) CreatePool(ctx context.Context, name string) error {
	if err := checkName("pool", name); err != nil {
		return err
	}
	if _, err := c.Admin(ctx, "ceph", "osd", "pool", "create", name); err != nil {
		return err
	}
	_, err := c.Admin(ctx, "rbd", "pool", "init", name)
	return err
}

// Close stops the OSD, then the mon (SIGTERM, SIGKILL after a grace),
// waits for them to exit, kills any other process still using the
// cluster's conf, and removes Dir. It is idempotent: later calls return
// the first one's error.
func (c *Cluster) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.err
	}
	c.closed = true
	c.rgwMu.Lock()
	errs := []error{c.rgw.stop()}
	c.rgwMu.Unlock()
	for _, p := range []*proc.Proc{c.osd, c.mon} {
		errs = append(errs, p.Stop(stopGrace))
	}
	errs = append(errs, killUsers(c.conf))
	if err := os.RemoveAll(c.opts.Dir); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		c.err = fmt.Errorf("ceph: closing the cluster in %s: %w", c.opts.Dir, err)
	}
	return c.err
}

// inNetNS runs name with args in network namespace ns and returns its
// standard output. It runs from / with no CEPH_* variables, so neither a
// ceph.conf in the working directory nor the caller's environment
// changes what it does, and it dies with this process: a test killed by
// -timeout leaves no CLI waiting for a cluster that is gone (librados
// waits for an OSD without a time limit).
func inNetNS(ctx context.Context, ns string, stdin io.Reader, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + netnsPath(ns), "--", name}, args...)...)
	cmd.Dir = "/"
	cmd.Env = cleanEnv()
	cmd.Stdin = stdin
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	go func() {
		// The kernel sends Pdeathsig when the thread that started the
		// child ends (golang/go#27505), and Go ends threads that locked
		// goroutines leave behind: started from a thread locked to this
		// goroutine until the child is reaped, the CLI dies with the
		// process only (as internal/testutil/proc does for daemons).
		runtime.LockOSThread()
		done <- cmd.Run()
	}()
	if err := <-done; err != nil {
		return stdout.Bytes(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, tailString(stderr.Bytes(), 2000))
	}
	return stdout.Bytes(), nil
}

// netnsPath is where ip netns keeps namespace ns.
func netnsPath(ns string) string { return filepath.Join("/run/netns", ns) }

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CEPH_") {
			env = append(env, kv)
		}
	}
	return env
}

// addrIn fails unless addr is on an interface of namespace ns: a mon
// that cannot bind retries for 10 s before it exits.
func addrIn(ctx context.Context, ns, addr string) error {
	if _, err := os.Stat(netnsPath(ns)); err != nil {
		return fmt.Errorf("ceph: Options.NetNS %q: %w", ns, err)
	}
	out, err := exec.CommandContext(ctx, "ip", "-n", ns, "-4", "-o", "addr", "show").CombinedOutput()
	if err != nil {
		return fmt.Errorf("ceph: listing the addresses of network namespace %s: %w: %s", ns, err, bytes.TrimSpace(out))
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "inet" && strings.SplitN(f[i+1], "/", 2)[0] == addr {
				return nil
			}
		}
	}
	return fmt.Errorf("ceph: Options.Addr %s is on no interface of network namespace %s", addr, ns)
}

// tailString is the last max bytes of b, trimmed.
func tailString(b []byte, max int) string {
	b = bytes.TrimSpace(b)
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}
