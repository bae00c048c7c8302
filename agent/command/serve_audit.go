package command

import (
	"github.com/spf13/pflag"

	"github.com/virtplane/terraform-provider-virtplane/agent/server"
	"github.com/virtplane/terraform-provider-virtplane/internal/audit"
)

// addAuditFlags registers the audit trail's flags (roles all and server;
// docs/security.md, "Audit"). --audit-log left unset takes
// <data-dir>/audit/audit.log; set empty, it keeps no file.
func addAuditFlags(f *pflag.FlagSet, a *server.AuditOptions) {
	f.Var(auditLogFlag{a}, "audit-log", "roles all and server: the audit log, one JSON record per line of every write and console, export and migration request (default <data-dir>/audit/audit.log; --audit-log= keeps no file)")
	f.IntVar(&a.MaxSizeMiB, "audit-log-max-size", audit.DefaultMaxSizeMiB, "roles all and server: MiB at which the audit log is rotated")
	f.IntVar(&a.MaxBackups, "audit-log-max-backups", audit.DefaultMaxBackups, "roles all and server: rotated audit log files kept (the oldest are removed)")
	f.StringVar(&a.Syslog, "audit-syslog", "", "roles all and server: also send each audit record to syslog (facility authpriv) at unixgram:///dev/log, udp://host:port or tcp://host:port")
	f.BoolVar(&a.NodeReports, "audit-node-reports", false, "roles all and server: also record the nodes' routine reports (heartbeats, status updates, image pulls, certificate renewals), which are many and made by the system")
}

// auditLogFlag tells an empty --audit-log (no file) from an unset one
// (the default path under the data dir, which other flags decide).
type auditLogFlag struct{ a *server.AuditOptions }

func (v auditLogFlag) String() string {
	if v.a == nil {
		return ""
	}
	return v.a.Path
}

func (v auditLogFlag) Set(s string) error {
	v.a.Path, v.a.NoFile = s, s == ""
	return nil
}

func (auditLogFlag) Type() string { return "path" }
