package server

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/virtplane/terraform-provider-virtplane/internal/apiserver"
	"github.com/virtplane/terraform-provider-virtplane/internal/audit"
)

// AuditOptions configure the API's audit trail (roles all and server;
// docs/security.md, "Audit").
type AuditOptions struct {
	// Path is the JSON lines file (--audit-log); "" is
	// <data-dir>/audit/audit.log unless NoFile.
	Path string
	// NoFile keeps no file (--audit-log=""): records go to syslog only,
	// or nowhere, and Audit.Read answers FailedPrecondition.
	NoFile bool
	// MaxSizeMiB and MaxBackups rotate the file (0: audit's defaults,
	// 100 MiB and 10 files).
	MaxSizeMiB, MaxBackups int
	// Syslog is where each record is copied too (--audit-syslog):
	// unixgram:///dev/log, udp://host:port or tcp://host:port; "" none.
	Syslog string
	// NodeReports records the nodes' routine reports too
	// (--audit-node-reports; apiserver.Options.AuditNodeReports).
	NodeReports bool
}

func (a AuditOptions) validate() error {
	if a.MaxSizeMiB < 0 {
		return fmt.Errorf("--audit-log-max-size (%d) must not be negative", a.MaxSizeMiB)
	}
	if a.MaxBackups < 0 {
		return fmt.Errorf("--audit-log-max-backups (%d) must not be negative", a.MaxBackups)
	}
	if a.Syslog != "" {
		if _, err := audit.ParseSyslogAddress(a.Syslog); err != nil {
			return fmt.Errorf("--audit-syslog: %w", err)
		}
	}
	return nil
}

// openAudit opens the audit trail o configures; nil when it keeps none.
func openAudit(o Options, reg prometheus.Registerer, log *slog.Logger) (*audit.Logger, error) {
	a := o.Audit
	cfg := audit.Config{MaxSizeMiB: a.MaxSizeMiB, MaxBackups: a.MaxBackups, Logger: log, Registerer: reg}
	if !a.NoFile {
		cfg.Path = a.Path
		if cfg.Path == "" {
			cfg.Path = filepath.Join(o.DataDir, "audit", "audit.log")
		}
	}
	if a.Syslog != "" {
		addr, err := audit.ParseSyslogAddress(a.Syslog)
		if err != nil {
			return nil, fmt.Errorf("--audit-syslog: %w", err)
		}
		cfg.Syslog = &addr
	}
	if cfg.Path == "" && cfg.Syslog == nil {
		return nil, nil
	}
	l, err := audit.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("--audit-log: %w", err)
	}
	return l, nil
}

// auditLog is l as the API takes it: no log at all when l is nil, never
// an interface holding a nil pointer.
func auditLog(l *audit.Logger) apiserver.AuditLog {
	if l == nil {
		return nil
	}
	return l
}
