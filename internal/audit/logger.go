package audit

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"log/syslog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gopkg.in/natefinch/lumberjack.v2"
)

// Defaults of Config.
const (
	DefaultMaxSizeMiB = 100
	DefaultMaxBackups = 10
	// syslogQueue bounds the records waiting for syslog: a slow or absent
	// syslog server costs at most this many records, never an API call's
	// time.
	syslogQueue = 1024
	// closeWait bounds how long Close waits for the queued records to
	// reach syslog.
	closeWait = 5 * time.Second
)

// Config says where records go.
type Config struct {
	// Path is the log file; its directory is made 0700 when missing and
	// the file is 0600. Empty keeps no file (and Read has nothing to
	// read).
	Path string
	// MaxSizeMiB is the size at which the file is rotated (0: 100);
	// MaxBackups how many rotated files are kept (0: 10), the oldest
	// removed first.
	MaxSizeMiB int
	MaxBackups int
	// Syslog, when set, also sends each record there.
	Syslog *SyslogAddress
	// Logger reports records that could not be written.
	Logger *slog.Logger
	// Registerer, when set, gets the counter of records not written
	// (virtplane_audit_write_failures_total, by sink).
	Registerer prometheus.Registerer
}

// Logger appends records. Its methods are safe for concurrent use; a nil
// *Logger records nothing.
type Logger struct {
	path string
	log  *slog.Logger
	fail *prometheus.CounterVec

	// mu orders writes (one line at a time) against Read's listing and
	// opening of the files, so that a rotation never falls between them.
	mu   sync.Mutex
	file *lumberjack.Logger

	closed bool

	syslogQ    chan []byte
	syslogDone chan struct{}
}

// ErrNoFile is Read's answer on a Logger that keeps no file.
var ErrNoFile = errors.New("this server keeps no audit log file")

// New prepares the file (when cfg.Path is set) and the syslog sender
// (when cfg.Syslog is set). Close releases both.
func New(cfg Config) (*Logger, error) {
	if cfg.MaxSizeMiB < 0 || cfg.MaxBackups < 0 {
		return nil, fmt.Errorf("audit log: max size (%d MiB) and max backups (%d) must not be negative", cfg.MaxSizeMiB, cfg.MaxBackups)
	}
	if cfg.MaxSizeMiB == 0 {
		cfg.MaxSizeMiB = DefaultMaxSizeMiB
	}
	if cfg.MaxBackups == 0 {
		cfg.MaxBackups = DefaultMaxBackups
	}
	l := &Logger{log: cfg.Logger}
	if l.log == nil {
		l.log = slog.Default()
	}
	l.fail = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "virtplane_audit_write_failures_total",
		Help: "Audit records not written, by sink (file, syslog). The API call they record was answered anyway.",
	}, []string{"sink"})
	if cfg.Registerer != nil {
		if err := cfg.Registerer.Register(l.fail); err != nil {
			return nil, fmt.Errorf("registering audit metrics: %w", err)
		}
	}
	if cfg.Path != "" {
		path, err := filepath.Abs(cfg.Path)
		if err != nil {
			return nil, fmt.Errorf("audit log %q: %w", cfg.Path, err)
		}
		if err := prepareFile(path); err != nil {
			return nil, err
		}
		l.path = path
		// lumberjack makes its files 0600 (a rotated file keeps the mode);
		// rotated names carry the UTC time of the rotation, which orders
		// them (listFiles).
		l.file = &lumberjack.Logger{Filename: path, MaxSize: cfg.MaxSizeMiB, MaxBackups: cfg.MaxBackups}
	}
	if cfg.Syslog != nil {
		l.syslogQ = make(chan []byte, syslogQueue)
		l.syslogDone = make(chan struct{})
		go l.sendSyslog(*cfg.Syslog)
	}
	return l, nil
}

// prepareFile makes the file's directory (0700, when missing: an existing
// directory is the operator's) and the file itself 0600: records say who
// did what, which is for the cluster's admins only.
func prepareFile(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("audit log directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	if err := f.Chmod(0o600); err != nil {
		return fmt.Errorf("audit log: %w", err)
	}
	return nil
}

// Log appends r. It never fails the caller: the API call it records has
// been answered (or is about to be) whatever happens here, and refusing
// calls because a disk is full would turn the audit trail into an outage.
// A record that cannot be written is logged with slog and counted
// (virtplane_audit_write_failures_total) instead; alert on that counter.
func (l *Logger) Log(r Record) {
	if l == nil {
		return
	}
	r.Time = r.Time.UTC()
	r.Message = capMessage(r.Message)
	line, err := json.Marshal(r)
	if err != nil {
		// Only invalid UTF-8 is escaped, never refused: unreachable.
		l.failed("file", r, err)
		return
	}
	line = append(line, '\n')
	// One lock around both sinks: lines reach syslog in the file's order,
	// and Close cannot close the queue under a send.
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		l.failed("file", r, errors.New("the audit log is closed"))
		return
	}
	if l.file != nil {
		if _, err := l.file.Write(line); err != nil {
			l.failed("file", r, err)
		}
	}
	if l.syslogQ != nil {
		select {
		case l.syslogQ <- line:
		default:
			l.failed("syslog", r, errors.New("the syslog queue is full: the syslog server does not keep up"))
		}
	}
}

func (l *Logger) failed(sink string, r Record, err error) {
	l.fail.WithLabelValues(sink).Inc()
	l.log.Error("audit record not written", "sink", sink, "method", r.Method, "identity", r.Identity, "code", r.Code, "err", err)
}

// sendSyslog sends the queued lines until Close, connecting on first use
// and again after a failure, so that a syslog server that is down when
// the agent starts costs records, not the start.
func (l *Logger) sendSyslog(a SyslogAddress) {
	defer close(l.syslogDone)
	var w *syslog.Writer
	defer func() {
		if w != nil {
			_ = w.Close()
		}
	}()
	for line := range l.syslogQ {
		if w == nil {
			var err error
			if w, err = dialSyslog(a); err != nil {
				l.fail.WithLabelValues("syslog").Inc()
				l.log.Error("audit record not sent to syslog", "address", a.String(), "err", err)
				continue
			}
		}
		// Info is the priority given at Dial (syslogPriority); the
		// trailing newline is the file's, not syslog's.
		if err := w.Info(string(line[:len(line)-1])); err != nil {
			l.fail.WithLabelValues("syslog").Inc()
			l.log.Error("audit record not sent to syslog", "address", a.String(), "err", err)
			_ = w.Close()
			w = nil
		}
	}
}

// Close flushes what is queued for syslog (for at most a few seconds) and
// closes the file. Records logged after Close are lost.
func (l *Logger) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	if l.syslogQ != nil {
		close(l.syslogQ)
	}
	var err error
	if l.file != nil {
		err = l.file.Close()
	}
	l.mu.Unlock()
	if l.syslogDone != nil {
		select {
		case <-l.syslogDone:
		case <-time.After(closeWait):
			l.log.Warn("audit records queued for syslog were not all sent before shutdown")
		}
	}
	return err
}
