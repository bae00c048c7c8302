// Package ceph runs the Ceph CLIs (rbd, ceph, qemu-img's rbd driver) for
// the storage classes on RBD: the server's part (fencing, deleting,
// snapshots, resizing; a CSI controller plugin's work) and the node
// agent's (importing images, cloning volumes). It is a client of an
// existing cluster, never a replacement: every operation is one CLI call
// with an argument list, bounded in time.
//
// The cephx key reaches the CLIs only as a file (KeyFile, 0600): an
// argument would be readable by every user in /proc/PID/cmdline. Errors
// carry the tail of the CLI's stderr, which never holds the key.
package ceph

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Errors a caller tells apart (errors.Is).
var (
	// ErrNotFound: the image, snapshot or pool does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists: the image or snapshot exists already.
	ErrExists = errors.New("already exists")
	// ErrUnreachable: no monitor answered in time.
	ErrUnreachable = errors.New("no monitor reachable")
	// ErrDenied: cephx refused the user or key, or a cap is missing.
	ErrDenied = errors.New("permission denied")
	// ErrBusy: the image has watchers, clones or snapshots in the way.
	ErrBusy = errors.New("busy")
)

// DefaultTimeout bounds one CLI call. librados waits 300 s for a monitor
// by default (client_mount_timeout); an unreachable class must fail an
// operation within seconds, with the cause.
const DefaultTimeout = 30 * time.Second

// ConnectTimeout is how long a Ceph client waits for a monitor and for a
// monitor command (client_mount_timeout, rados_mon_op_timeout): the CLIs
// here, and QEMU through the conf file QEMUConf writes. librados' default
// is 300 s, which a start waited out with an unreachable monitor
// (docs/notes/storage-probes.md: 301 s without, ~7 s with a 5 s bound).
const ConnectTimeout = 10 * time.Second

// Runner runs a command and returns its stdout; a CLI that fails gives a
// *CLIError with its stderr. The real one execs; tests of pure logic fake
// it.
type Runner interface {
	Run(ctx context.Context, name string, args ...string) (stdout []byte, err error)
}

// Conn is how to reach one pool of one cluster as one cephx user.
type Conn struct {
	// Monitors are "IP:port" (validated by the API: IP literals).
	Monitors []string
	Pool     string
	// User is the cephx name without "client.".
	User string
	// KeyFile holds the user's key (0600, owned by the caller's user).
	KeyFile string
	// NetNS, when set, is the network namespace (/proc/PID/ns/net or
	// /run/netns/NAME) the CLIs run in: a node agent's, where its
	// libvirtd's QEMUs connect from, so that Ceph sees one address per
	// node (the one the node is fenced by).
	NetNS string
	// Timeout bounds each call; 0 is DefaultTimeout.
	Timeout time.Duration
	// Runner runs the CLIs; nil execs them.
	Runner Runner
}

// ExecRunner execs commands.
type ExecRunner struct{}

// Run runs name with args, returning stdout, or an error with the last
// lines of stderr.
func (ExecRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w (%s)", name, ctx.Err(), lastLines(stderr.String(), 3))
		}
		return nil, &CLIError{Name: name, Stderr: stderr.String(), Err: err}
	}
	return stdout.Bytes(), nil
}

// CLIError is a CLI that exited non-zero, as a Runner returns it: its
// standard error says why (the errors here are told apart by it).
type CLIError struct {
	Name   string
	Stderr string
	Err    error // the exit status
}

func (e *CLIError) Error() string {
	msg := lastLines(e.Stderr, 3)
	if !strings.HasPrefix(msg, e.Name+":") {
		msg = e.Name + ": " + msg
	}
	return fmt.Sprintf("%s (%v)", msg, e.Err)
}

func (e *CLIError) Unwrap() error { return e.Err }

// logPrefix is the start of a Ceph log line: time, thread id, level.
var logPrefix = regexp.MustCompile(`^\d{4}-\d\d-\d\dT[0-9:.+]+ [0-9a-f]+ +-?\d+ `)

// lastLines is the last n non-empty lines of s, joined by "; ": Ceph's
// CLIs put the cause last, after warnings.
func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		// Ceph's log lines start with a time, a thread and a level.
		l = logPrefix.ReplaceAllString(strings.TrimSpace(l), "")
		if l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "; ")
}

// classify wraps err with the sentinel its stderr names, if any, else
// the one its exit status names.
func classify(err error) error {
	var ce *CLIError
	if !errors.As(err, &ce) {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%w: %w", ErrUnreachable, err)
		}
		return err
	}
	// The cause as the CLIs print it: "(2) No such file or directory"
	// (rbd), "[errno 110]" (ceph).
	s := ce.Stderr
	switch {
	// Refusals and timeouts first: a client without a keyring also
	// prints a "(2) No such file or directory" of the keyring's search.
	case strings.Contains(s, "(1) Operation not permitted"), strings.Contains(s, "(13) Permission denied"),
		strings.Contains(s, "handle_auth_bad_method"), strings.Contains(s, "[errno 13]"):
		return fmt.Errorf("%w: %w", ErrDenied, err)
	case strings.Contains(s, "(110) Connection timed out"), strings.Contains(s, "authenticate timed out"),
		strings.Contains(s, "couldn't connect to the cluster"), strings.Contains(s, "[errno 110]"):
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	case strings.Contains(s, "(2) No such file or directory"), strings.Contains(s, "[errno 2]"):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case strings.Contains(s, "(17) File exists"):
		return fmt.Errorf("%w: %w", ErrExists, err)
	case strings.Contains(s, "(16) Device or resource busy"), strings.Contains(s, "(39) Directory not empty"):
		return fmt.Errorf("%w: %w", ErrBusy, err)
	}
	// rbd exits with the errno of what failed. The ceph CLI exits 1 for
	// any failure, so 1 (EPERM) says nothing.
	var ee *exec.ExitError
	if errors.As(ce.Err, &ee) {
		switch syscall.Errno(ee.ExitCode()) {
		case syscall.ENOENT:
			return fmt.Errorf("%w: %w", ErrNotFound, err)
		case syscall.EEXIST:
			return fmt.Errorf("%w: %w", ErrExists, err)
		case syscall.EBUSY, syscall.ENOTEMPTY:
			return fmt.Errorf("%w: %w", ErrBusy, err)
		case syscall.EACCES:
			return fmt.Errorf("%w: %w", ErrDenied, err)
		case syscall.ETIMEDOUT:
			return fmt.Errorf("%w: %w", ErrUnreachable, err)
		}
	}
	return err
}

// common are the arguments every Ceph CLI call starts with: which
// monitors, which user, the key file, no ceph.conf of the host (this
// class's settings only) and bounded waits.
func (c *Conn) common() []string {
	secs := strconv.Itoa(int(ConnectTimeout / time.Second))
	return []string{
		"--conf", "/dev/null",
		"--mon-host", strings.Join(c.Monitors, ","),
		"--id", c.User,
		"--keyfile", c.KeyFile,
		"--client-mount-timeout", secs,
		"--rados-mon-op-timeout", secs,
		"--no-mon-config",
	}
}

// run runs a Ceph CLI (rbd, ceph) with the connection's arguments
// first.
func (c *Conn) run(ctx context.Context, name string, args ...string) ([]byte, error) {
	return c.exec(ctx, name, append(c.common(), args...)...)
}

// exec runs name with args in the connection's namespace, bounded by
// its timeout.
func (c *Conn) exec(ctx context.Context, name string, args ...string) ([]byte, error) {
	t := c.Timeout
	if t <= 0 {
		t = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, t)
	defer cancel()
	r := c.Runner
	if r == nil {
		r = ExecRunner{}
	}
	if c.NetNS != "" {
		args = append([]string{"--net=" + c.NetNS, "--", name}, args...)
		name = "nsenter"
	}
	out, err := r.Run(ctx, name, args...)
	if err != nil {
		return nil, classify(err)
	}
	return out, nil
}
