package ceph

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/proc"
)

const (
	monID = "a"
	// osdPoll is how often Start asks whether the OSD is up: each ask
	// is a ceph CLI run (~0.2 s of Python).
	osdPoll = 200 * time.Millisecond
)

// bootstrap makes the cluster in c.opts.Dir and starts it (the
// reference's steps: package doc).
func (c *Cluster) bootstrap(ctx context.Context) error {
	d := c.opts.Dir
	for _, sub := range []string{"run", "log", "mon", "osd"} {
		if err := os.Mkdir(filepath.Join(d, sub), 0o700); err != nil {
			return err
		}
	}
	fsid := uuid.NewString()
	if err := os.WriteFile(c.conf, []byte(renderConf(fsid, c.opts)), 0o600); err != nil {
		return err
	}
	monKeyring, adminKeyring := filepath.Join(d, "ceph.mon.keyring"), filepath.Join(d, "ceph.client.admin.keyring")
	monmap := filepath.Join(d, "monmap")
	// ceph-authtool writes keyrings 0600 and generates the keys itself.
	for _, args := range [][]string{
		{"ceph-authtool", "--create-keyring", monKeyring, "--gen-key", "-n", "mon.", "--cap", "mon", "allow *"},
		{"ceph-authtool", "--create-keyring", adminKeyring, "--gen-key", "-n", "client.admin",
			"--cap", "mon", "allow *", "--cap", "osd", "allow *", "--cap", "mgr", "allow *", "--cap", "mds", "allow *"},
		{"ceph-authtool", monKeyring, "--import-keyring", adminKeyring},
		{"monmaptool", "--create", "--addv", monID, monHost(c.opts.Addr), "--fsid", fsid, monmap},
		{"ceph-mon", "-c", c.conf, "--mkfs", "-i", monID, "--monmap", monmap, "--keyring", monKeyring},
	} {
		if _, err := c.Exec(ctx, args[0], args[1:]...); err != nil {
			return err
		}
	}

	// From here on a daemon that exits ends the start at once, with its
	// log, instead of a CLI waiting for it until ctx ends.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var err error
	if c.mon, err = c.startDaemon(ctx, cancel, "ceph-mon", "-f", "-c", c.conf, "-i", monID); err != nil {
		return err
	}
	// The pool needs only the mon: made before the OSD, it is active as
	// soon as the OSD is up. The CLI waits for the mon to listen.
	if _, err := c.Admin(ctx, "ceph", "osd", "pool", "create", c.opts.Pool); err != nil {
		return withCause(ctx, err)
	}
	if err := c.startOSD(ctx, cancel); err != nil {
		return withCause(ctx, err)
	}
	if err := c.waitOSDUp(ctx); err != nil {
		return withCause(ctx, err)
	}
	// Returns once the pool's placement groups are active.
	if _, err := c.Admin(ctx, "rbd", "pool", "init", c.opts.Pool); err != nil {
		return withCause(ctx, err)
	}
	return nil
}

// startOSD registers OSD 0 with a key made here, formats its BlueStore
// and starts it.
func (c *Cluster) startOSD(ctx context.Context, cancel context.CancelCauseFunc) error {
	key, err := c.Exec(ctx, "ceph-authtool", "--gen-print-key")
	if err != nil {
		return err
	}
	secret := strings.TrimSpace(string(key))
	osdUUID := uuid.NewString()
	req, err := json.Marshal(map[string]string{"cephx_secret": secret})
	if err != nil {
		return err
	}
	// The secret goes on stdin: never on a command line.
	out, err := inNetNS(ctx, c.opts.NetNS, strings.NewReader(string(req)), "ceph", "-c", c.conf, "osd", "new", osdUUID, "-i", "-")
	if err != nil {
		return err
	}
	if id := strings.TrimSpace(string(out)); id != "0" {
		return fmt.Errorf("ceph osd new: OSD id %q, want 0 (a fresh cluster's first)", id)
	}
	dir := filepath.Join(c.opts.Dir, "osd", "ceph-0")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	keyring := filepath.Join(dir, "keyring")
	if err := os.WriteFile(keyring, []byte("[osd.0]\n\tkey = "+secret+"\n"), 0o600); err != nil {
		return err
	}
	if _, err := c.Exec(ctx, "ceph-osd", "-c", c.conf, "-i", "0", "--mkfs", "--osd-uuid", osdUUID, "--keyring", keyring); err != nil {
		return err
	}
	c.osd, err = c.startDaemon(ctx, cancel, "ceph-osd", "-f", "-c", c.conf, "-i", "0", "--keyring", keyring)
	return err
}

// startDaemon starts a Ceph daemon in the foreground in the cluster's
// namespace, as a child tied to this process, and cancels ctx with the
// cause when it exits.
func (c *Cluster) startDaemon(ctx context.Context, cancel context.CancelCauseFunc, name string, args ...string) (*proc.Proc, error) {
	// nsenter execs the daemon: the child's pid is the daemon's.
	p, err := proc.Start(proc.DiesWithParent, name, filepath.Join(c.opts.Dir, "log", name+".out"), "nsenter",
		append([]string{"--net=" + netnsPath(c.opts.NetNS), "--", name}, args...)...)
	if err != nil {
		return nil, err
	}
	go func() {
		select {
		case <-ctx.Done():
		case <-waitCh(p):
			cancel(fmt.Errorf("%s exited: %v", name, p.Wait()))
		}
	}()
	return p, nil
}

// waitCh is closed when p has exited.
func waitCh(p *proc.Proc) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		_ = p.Wait()
		close(ch)
	}()
	return ch
}

// waitOSDUp polls `ceph osd stat` until one OSD is up.
func (c *Cluster) waitOSDUp(ctx context.Context) error {
	var last error
	err := wait.PollUntilContextCancel(ctx, osdPoll, true, func(ctx context.Context) (bool, error) {
		out, err := c.Admin(ctx, "ceph", "osd", "stat", "--format", "json")
		if err != nil {
			last = err
			return false, nil
		}
		var st struct {
			Up int `json:"num_up_osds"`
		}
		if err := json.Unmarshal(out, &st); err != nil {
			return false, fmt.Errorf("ceph osd stat: %w: %q", err, out)
		}
		return st.Up >= 1, nil
	})
	if err != nil && last != nil {
		return fmt.Errorf("waiting for the OSD to be up: %w (last: %v)", err, last)
	}
	if err != nil {
		return fmt.Errorf("waiting for the OSD to be up: %w", err)
	}
	return nil
}

// withCause adds why ctx was cancelled (a daemon that exited) to err.
func withCause(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
		return fmt.Errorf("%w (%v)", err, cause)
	}
	return err
}

// logTails is the end of the daemons' logs and output, for a failed
// start's error.
func (c *Cluster) logTails() string {
	var b strings.Builder
	for _, name := range []string{"ceph-mon.out", "ceph-mon." + monID + ".log", "ceph-osd.out", "ceph-osd.0.log"} {
		data, err := os.ReadFile(filepath.Join(c.opts.Dir, "log", name))
		if err != nil || len(data) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n--- %s (end)\n%s", name, tailString(data, 3000))
	}
	return b.String()
}
