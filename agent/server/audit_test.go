package server

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/audit"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

func TestValidateAuditFlags(t *testing.T) {
	checkValidate(t, []validateCase{
		{"a syslog socket", func(o *Options) { o.Audit.Syslog = "unixgram:///dev/log" }, ""},
		{"a syslog server", func(o *Options) { o.Audit.Syslog = "tcp://logs.example.com:6514" }, ""},
		{"syslog over http", func(o *Options) { o.Audit.Syslog = "http://logs:514" }, `--audit-syslog: syslog address "http://logs:514": unsupported scheme "http"`},
		{"a syslog server without a port", func(o *Options) { o.Audit.Syslog = "udp://logs" }, "--audit-syslog"},
		{"a negative size", func(o *Options) { o.Audit.MaxSizeMiB = -1 }, "--audit-log-max-size (-1) must not be negative"},
		{"negative backups", func(o *Options) { o.Audit.MaxBackups = -2 }, "--audit-log-max-backups (-2) must not be negative"},
	})
}

// An agent records the API's writes in <data-dir>/audit/audit.log by
// default, and serves them to Audit.Read.
func TestAgentKeepsAuditLog(t *testing.T) {
	a := startAgent(t, Options{Role: RoleServer, NodeName: "srv-1", MetricsListen: "", NoControllers: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{Endpoint: "unix://" + a.opts.Socket})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Nodes.Cordon(ctx, &apiv1.CordonNodeRequest{Name: "none"}); status.Code(err) != codes.NotFound {
		t.Fatalf("cordon a missing node: %v", err)
	}
	dir := filepath.Join(a.opts.DataDir, "audit")
	data, err := os.ReadFile(filepath.Join(dir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	var r audit.Record
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("%q: %v", data, err)
	}
	if r.Identity != "admin" || r.Method != apiv1.Nodes_Cordon_FullMethodName || r.Name != "none" || r.Code != "NotFound" || r.Peer != "unix" || r.Server != "srv-1" {
		t.Fatalf("record %+v", r)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("audit directory: %v %v", st.Mode(), err)
	}
	s, err := apiv1.NewAuditClient(c.Conn).Read(ctx, &apiv1.ReadAuditRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.Recv()
	if err != nil || got.GetMethod() != apiv1.Nodes_Cordon_FullMethodName || got.GetServer() != "srv-1" {
		t.Fatalf("Audit.Read: %v, %v", got, err)
	}
}

// --audit-log= keeps no file: nothing under <data-dir>/audit, and
// Audit.Read says there is no log.
func TestAgentWithoutAuditLog(t *testing.T) {
	a := startAgent(t, Options{Role: RoleServer, MetricsListen: "", NoControllers: true, Audit: AuditOptions{NoFile: true}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{Endpoint: "unix://" + a.opts.Socket})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, _ = c.Nodes.Cordon(ctx, &apiv1.CordonNodeRequest{Name: "none"})
	if _, err := os.Stat(filepath.Join(a.opts.DataDir, "audit")); !os.IsNotExist(err) {
		t.Fatalf("audit directory: %v", err)
	}
	s, err := apiv1.NewAuditClient(c.Conn).Read(ctx, &apiv1.ReadAuditRequest{})
	if err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no audit log") {
		t.Fatalf("Audit.Read: %v", err)
	}
}
