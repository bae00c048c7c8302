package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-plugin"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/virt"
)

// eventQueue buffers libvirt events between the event-loop thread and
// the driver; when full, events are dropped (each update carries the full
// status, and the next one catches up).
const eventQueue = 256

// connectTimeout bounds the first libvirt connection: a launcher that
// cannot reach libvirtd fails Launch with a clear error.
const connectTimeout = 15 * time.Second

type serveFlags struct {
	uri, domain, uid, key, logFile, socketDir, pidDir, level, lockFile string
}

func parseServe(args []string) (serveFlags, error) {
	var f serveFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.StringVar(&f.uri, "libvirt-uri", defaultURI(), "libvirt connection URI (env VIRTPLANE_LIBVIRT_URI)")
	fs.StringVar(&f.domain, "domain-name", "", "name of the libvirt domain this launcher manages (required)")
	fs.StringVar(&f.uid, "vmi-uid", "", "uid of the VMI this launcher serves")
	fs.StringVar(&f.key, "vmi-key", "", "namespace/name of that VMI, for logs")
	fs.StringVar(&f.logFile, "log-file", os.Getenv("VIRTPLANE_LAUNCHER_LOG_FILE"), "append logs here instead of stderr (env VIRTPLANE_LAUNCHER_LOG_FILE)")
	fs.StringVar(&f.socketDir, "socket-dir", "", "directory for the plugin socket (default $TMPDIR)")
	fs.StringVar(&f.pidDir, "qemu-pid-dir", driver.DefaultQEMUPidDir, "where libvirtd writes QEMU pid files")
	fs.StringVar(&f.level, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&f.lockFile, "lock-file", "", "flock held while running, so only one launcher manages the domain")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if f.domain == "" {
		return f, errors.New("--domain-name is required")
	}
	if err := launcher.CheckQEMUPidDir(f.pidDir); err != nil {
		return f, fmt.Errorf("--qemu-pid-dir: %w", err)
	}
	return f, nil
}

func serve(args []string) int {
	f, err := parseServe(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "virtplane-launcher serve:", err)
		return 2
	}
	// Refuse before touching libvirt when not started by the node agent.
	if os.Getenv(launcher.Handshake.MagicCookieKey) != launcher.Handshake.MagicCookieValue {
		fmt.Fprintln(os.Stderr, "virtplane-launcher serve: this command is started by the virtplane node agent through go-plugin; use probe, list-domains or version by hand")
		return 2
	}
	// The node agent that started us holds our stdout/stderr pipes. If it
	// dies, writes to them fail with EPIPE, and Go's default SIGPIPE on
	// fd 1/2 would kill the launcher: ignore it, the launcher must live on.
	signal.Ignore(syscall.SIGPIPE, syscall.SIGHUP)

	out, err := openLog(f.logFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "virtplane-launcher serve:", err)
		return 1
	}
	log := slog.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: parseLevel(f.level)})).With(
		"domain", f.domain, "vmi_uid", f.uid, "vmi", f.key, "pid", os.Getpid())
	log.Info("launcher starting", "version", version, "libvirt_uri", f.uri)

	if f.lockFile != "" {
		lock, err := lockDomain(f.lockFile)
		if err != nil {
			log.Error("cannot start", "error", err)
			fmt.Fprintln(os.Stderr, "virtplane-launcher serve:", err)
			return 3
		}
		defer lock.Close()
	}

	if f.socketDir != "" {
		// go-plugin's server reads its socket directory from the
		// environment.
		if err := os.Setenv(plugin.EnvUnixSocketDir, f.socketDir); err != nil {
			log.Error("set socket dir", "error", err)
			return 1
		}
	}

	events := make(chan driver.Event, eventQueue)
	conn, err := openWithRetry(f.uri, virt.Options{Logger: log, Events: func(e driver.Event) {
		select {
		case events <- e:
		default:
			log.Warn("libvirt event dropped: queue full", "type", e.Type, "detail", e.Detail)
		}
	}})
	if err != nil {
		log.Error("cannot connect to libvirt", "error", err)
		return 1
	}
	drv, err := driver.New(conn, events, driver.Config{
		DomainName: f.domain,
		VMIUID:     f.uid,
		QEMUPidDir: f.pidDir,
		Version:    version,
		Logger:     log,
	})
	if err != nil {
		log.Error("cannot start driver", "error", err)
		return 1
	}
	shutdown := func() {
		drv.Close()
		if err := conn.Close(); err != nil {
			log.Warn("close libvirt connection", "error", err)
		}
	}

	// SIGTERM ends the launcher, never the domain: libvirtd owns QEMU,
	// and the node agent decides the domain's fate (a new launcher adopts
	// it). This is also what a systemd stop of the agent's unit sends.
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	go func() {
		sig := <-term
		log.Info("launcher exiting on signal; the domain keeps running", "signal", sig.String())
		shutdown()
		os.Exit(0)
	}()

	plugin.Serve(launcher.ServeConfig(drv, launcher.HCLogger(log.With("logger", "go-plugin"))))
	// Serve returns when the node agent asked us to exit (Client.Stop).
	log.Info("launcher exiting: stop requested")
	shutdown()
	return 0
}

// openLog opens the log file for appending and makes it the process's
// stderr (fd 2) as well, so Go runtime panics and libvirt's C-level
// messages land in it rather than in a pipe whose reader may be gone.
func openLog(path string) (io.Writer, error) {
	if path == "" {
		return os.Stderr, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return nil, fmt.Errorf("open log file: %w", err)
	}
	if err := syscall.Dup3(int(f.Fd()), 2, 0); err != nil {
		return nil, fmt.Errorf("redirect stderr to %s: %w", path, err)
	}
	return f, nil
}

// openWithRetry opens libvirt, trying every second for connectTimeout: a
// launcher started while libvirtd restarts waits for it. It returns the
// last error when libvirt never answered.
func openWithRetry(uri string, opts virt.Options) (conn libvirtConn, err error) {
	_ = wait.PollUntilContextTimeout(context.Background(), time.Second, connectTimeout, true, func(context.Context) (bool, error) {
		if conn, err = openLibvirt(uri, opts); err != nil {
			opts.Logger.Warn("libvirt not reachable yet; retrying", "error", err)
			return false, nil
		}
		return true, nil
	})
	return conn, err
}

func parseLevel(s string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return slog.LevelInfo
	}
	return l
}
