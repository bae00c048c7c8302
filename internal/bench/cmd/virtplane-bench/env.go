package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/bench"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
)

// env is what every measurement shares: binaries, the guest images, a
// work directory, the libvirt connection, and what to clean up.
type env struct {
	log      *slog.Logger
	mode     string
	binDir   string // abs
	agent    string
	launcher string
	uri      string // qemu:///system
	work     string // /tmp/vpb-<id>: short, for unix socket paths
	images   string // image dir with the test guest's kernel and initrd
	guestDir string // the built test guest (abs), for its disk image
	kernel   string // file names in images
	initrd   string
	// prefix starts every libvirt domain name and namespace of this run:
	// "bench-<id>".
	prefix string
	lv     libvirtConn
	keep   bool // keep the work directory (logs) afterwards
	// profiles is where profiles of missed targets go (abs).
	profiles string

	mu     sync.Mutex
	agents []*bench.Agent
}

type envOptions struct {
	mode, binDir, guestDir, workRoot, uri string
	profiles                              string
	keep                                  bool
}

func newEnv(ctx context.Context, log *slog.Logger, o envOptions) (_ *env, err error) {
	bin, err := filepath.Abs(o.binDir)
	if err != nil {
		return nil, err
	}
	profiles, err := filepath.Abs(o.profiles)
	if err != nil {
		return nil, err
	}
	e := &env{log: log, mode: o.mode, binDir: bin, uri: o.uri, keep: o.keep, profiles: profiles,
		agent: filepath.Join(bin, "virtplane-agent"), launcher: filepath.Join(bin, "virtplane-launcher")}
	for _, b := range []string{e.agent, e.launcher} {
		if _, err := os.Stat(b); err != nil {
			return nil, fmt.Errorf("%w (run make build)", err)
		}
	}
	// First: a benchmark built without libvirt fails before it makes
	// anything.
	if e.lv, err = openLibvirt(e.uri); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = e.lv.Close()
		}
	}()
	id := make([]byte, 3)
	if _, err := rand.Read(id); err != nil {
		return nil, err
	}
	e.prefix = "bench-" + hex.EncodeToString(id)
	e.work = filepath.Join(o.workRoot, "vpb-"+hex.EncodeToString(id))
	// QEMU runs as another user under qemu:///system and must traverse
	// to the kernel.
	if err := os.MkdirAll(e.work, 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(e.work, 0o755); err != nil {
		return nil, err
	}
	if err := e.prepareImages(o.guestDir); err != nil {
		return nil, err
	}
	log.Info("benchmark environment", "work", e.work, "prefix", e.prefix, "bin", bin)
	return e, nil
}

// prepareImages copies the test guest into an image directory of the run:
// libvirt relabels the files it boots from, and bin/guest is shared.
func (e *env) prepareImages(guestDir string) error {
	var err error
	if e.guestDir, err = filepath.Abs(guestDir); err != nil {
		return err
	}
	e.images = filepath.Join(e.work, "images")
	if err := os.MkdirAll(e.images, 0o755); err != nil {
		return err
	}
	kernel, err := testguest.Install(guestDir, e.images)
	if err != nil {
		return fmt.Errorf("test guest (make guest): %w", err)
	}
	e.kernel, e.initrd = kernel, testguest.InitrdFile
	return nil
}

// startAgent starts an agent and registers it for cleanup.
func (e *env) startAgent(ctx context.Context, cfg bench.AgentConfig) (*bench.Agent, error) {
	cfg.Bin, cfg.Launcher, cfg.ImageDir = e.agent, e.launcher, e.images
	if cfg.LibvirtURI == "" {
		cfg.LibvirtURI = e.uri
	}
	a, err := bench.StartAgent(ctx, cfg)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.agents = append(e.agents, a)
	e.mu.Unlock()
	return a, nil
}

// teardown ends everything of a measurement whose names start with
// prefix: its agents (SIGKILL: the domains go below anyway), the
// launchers they started, and its domains.
func (e *env) teardown(prefix string, agents ...*bench.Agent) error {
	var errs []error
	for _, a := range agents {
		errs = append(errs, a.Kill())
	}
	errs = append(errs, e.killLaunchers(prefix))
	n, err := e.lv.RemoveAll(prefix)
	if n > 0 {
		e.log.Debug("removed domains", "prefix", prefix, "count", n)
	}
	return errors.Join(append(errs, err)...)
}

// killLaunchers SIGKILLs the launchers of this run's binary serving
// domains named prefix*, and waits until they are gone.
func (e *env) killLaunchers(prefix string) error {
	ls := procfs.Launchers(e.launcher, prefix)
	for _, pid := range ls {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	return waitUntil(context.Background(), 30*time.Second, fmt.Sprintf("launchers %v to exit after SIGKILL", ls), func() bool {
		for _, pid := range ls {
			if procfs.Alive(pid) {
				return false
			}
		}
		return true
	})
}

// cleanupAll ends every agent the run started and every launcher and
// domain of the run.
func (e *env) cleanupAll() error {
	e.mu.Lock()
	agents := e.agents
	e.agents = nil
	e.mu.Unlock()
	return e.teardown(e.prefix, agents...)
}

// close removes whatever is left, and the work directory unless asked to
// keep it.
func (e *env) close() {
	if err := e.cleanupAll(); err != nil {
		e.log.Error("cleanup", "err", err)
	}
	if e.lv != nil {
		_ = e.lv.Close()
	}
	if e.keep {
		e.log.Info("kept the work directory", "dir", e.work)
		return
	}
	if err := os.RemoveAll(e.work); err != nil {
		e.log.Warn("removing the work directory", "dir", e.work, "err", err)
	}
}

// track dials agent a and follows the VMs of namespace ns; done closes
// both.
func track(ctx context.Context, a *bench.Agent, ns string) (c *client.Client, tr *bench.Tracker, done func(), err error) {
	if c, err = a.Client(ctx); err != nil {
		return nil, nil, nil, err
	}
	if tr, err = bench.NewTracker(ctx, c, ns); err != nil {
		_ = c.Close()
		return nil, nil, nil, err
	}
	return c, tr, func() {
		tr.Close()
		_ = c.Close()
	}, nil
}
