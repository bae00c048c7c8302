package command

import (
	"testing"

	"github.com/spf13/pflag"

	"github.com/virtplane/terraform-provider-virtplane/agent/server"
)

// --audit-log unset takes the default path, set empty keeps no file.
func TestAuditFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want server.AuditOptions
	}{
		{nil, server.AuditOptions{MaxSizeMiB: 100, MaxBackups: 10}},
		{[]string{"--audit-log="}, server.AuditOptions{NoFile: true, MaxSizeMiB: 100, MaxBackups: 10}},
		{[]string{"--audit-log", "/var/log/virtplane/audit.log", "--audit-log-max-size=5", "--audit-log-max-backups=3",
			"--audit-syslog=udp://logs:514", "--audit-node-reports"},
			server.AuditOptions{Path: "/var/log/virtplane/audit.log", MaxSizeMiB: 5, MaxBackups: 3, Syslog: "udp://logs:514", NodeReports: true}},
	} {
		var a server.AuditOptions
		f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		addAuditFlags(f, &a)
		if err := f.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if a != c.want {
			t.Errorf("%v: %+v, want %+v", c.args, a, c.want)
		}
	}
	serve, _, err := NewRootCommand().Find([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"audit-log", "audit-log-max-size", "audit-log-max-backups", "audit-syslog", "audit-node-reports"} {
		if serve.Flags().Lookup(name) == nil {
			t.Errorf("serve has no --%s", name)
		}
	}
}
