package command

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/virtplane/terraform-provider-virtplane/agent/server"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// A first team (docs/security.md, "First team") against the real server
// over its TLS listener: a cluster-admin on the socket makes a namespace
// with a quota, a service account bound to edit there and its token; the
// team, with that token, works in its namespace, is refused outside it and
// beyond its quota with the role or quota named, until the token is
// revoked; a user's client certificate authenticates too; the audit log
// has the team's calls and never its token.
func TestScenarioFirstTeam(t *testing.T) {
	dir := testutil.ShortTempDir(t)
	a, err := server.Start(context.Background(), server.Options{
		DataDir: filepath.Join(dir, "data"), Socket: filepath.Join(dir, "agent.sock"), Listen: "127.0.0.1:0",
		LeaderElect: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		a.Shutdown(ctx)
	})
	admin := "unix://" + filepath.Join(dir, "agent.sock")
	tls := []string{"--endpoint", "https://" + a.TCPAddr().String(), "--ca-file", filepath.Join(dir, "data", "pki", "ca.crt")}
	asAdmin := func(args ...string) string {
		t.Helper()
		return mustRun(t, admin, args...)
	}
	// team runs the CLI over TLS with credential flags (--token-file, or
	// --client-cert and --client-key).
	teamIn := func(stdin string, cred []string, args ...string) (string, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var out, errOut testutil.SyncBuffer
		cmd, _ := newRootCommand(func(string) string { return "" })
		cmd.SetArgs(append(append(append([]string{}, tls...), cred...), args...))
		cmd.SetIn(strings.NewReader(stdin))
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		err := cmd.ExecuteContext(ctx)
		return out.String(), err
	}
	team := func(cred []string, args ...string) (string, error) {
		t.Helper()
		return teamIn("", cred, args...)
	}
	wantRefusal := func(err error, code codes.Code, parts ...string) {
		t.Helper()
		if err == nil || status.Code(err) != code {
			t.Fatalf("got %v, want %s", err, code)
		}
		for _, p := range parts {
			if !strings.Contains(err.Error(), p) {
				t.Errorf("refusal %q does not say %q", err, p)
			}
		}
	}

	asAdmin("namespace", "create", "team-a", "vcpus=2", "vms=1")
	asAdmin("auth", "serviceaccount", "create", "deployer", "-n", "team-a")
	asAdmin("auth", "bind", "--role", "edit", "-n", "team-a", "--service-account", "team-a/deployer")
	token := asAdmin("auth", "token", "issue", "--service-account", "team-a/deployer", "--ttl", "1h")
	if !strings.HasPrefix(token, "vpt_") || strings.Count(token, "\n") != 1 {
		t.Fatalf("token issue printed %q, want the token alone", token)
	}
	tokenFile := filepath.Join(dir, "deployer.token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	ci := []string{"--token-file", tokenFile}

	if out, err := team(ci, "auth", "whoami"); err != nil || !strings.Contains(out, "serviceaccount team-a/deployer") || !strings.Contains(out, "edit in team-a") {
		t.Fatalf("whoami: %q, %v", out, err)
	}
	vm := func(name string) string {
		return "kind: VirtualMachine\nmetadata: {name: " + name + "}\nspec: {run_strategy: Halted, template: {spec: {domain: {memory: {guest: 64Mi}}}}}\n"
	}
	if _, err := teamIn(vm("web"), ci, "apply", "-n", "team-a", "-f", "-"); err != nil {
		t.Fatalf("apply web in team-a: %v", err)
	}
	if out, err := team(ci, "get", "namespace", "team-a"); err != nil || !strings.Contains(out, "1/2") || !strings.Contains(out, "1/1") {
		t.Errorf("get namespace team-a as its editor: %q, %v", out, err)
	}
	_, err = teamIn(vm("db"), ci, "apply", "-n", "team-a", "-f", "-")
	wantRefusal(err, codes.ResourceExhausted, "exceeded quota", "vms")

	_, err = teamIn(vm("web"), ci, "apply", "-n", "default", "-f", "-")
	wantRefusal(err, codes.PermissionDenied, "serviceaccount team-a/deployer", "may not call", "needs edit in default")
	_, err = team(ci, "storageclass", "create", "shared-filesystem", "nfs", "--path", "/mnt/vms")
	wantRefusal(err, codes.PermissionDenied, "needs cluster-admin")
	if out, err := team(ci, "auth", "can-i", "StorageClasses.Create"); out != "no\n" || err == nil || !strings.Contains(err.Error(), "cluster-admin") {
		t.Errorf("can-i StorageClasses.Create: %q, %v", out, err)
	}
	if out, err := team(ci, "auth", "can-i", "VirtualMachines.Create", "-n", "team-a"); out != "yes\n" || err != nil {
		t.Errorf("can-i VirtualMachines.Create -n team-a: %q, %v", out, err)
	}

	// A user's client certificate, made here, with view in team-a.
	asAdmin("auth", "user", "create", "alice")
	asAdmin("auth", "bind", "--role", "view", "-n", "team-a", "--user", "alice")
	certDir := filepath.Join(dir, "alice")
	asAdmin("auth", "cert", "issue", "--user", "alice", "--out-dir", certDir)
	alice := []string{"--client-cert", filepath.Join(certDir, "client.crt"), "--client-key", filepath.Join(certDir, "client.key")}
	if out, err := team(alice, "get", "vms", "-n", "team-a"); err != nil || !strings.Contains(out, "web") {
		t.Errorf("get vms as alice: %q, %v", out, err)
	}
	_, err = team(alice, "delete", "vm", "web", "-n", "team-a")
	wantRefusal(err, codes.PermissionDenied, "user alice", "needs edit in team-a")

	// Revoked: refused at once.
	list := asAdmin("auth", "token", "list", "--service-account", "team-a/deployer")
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 2 {
		t.Fatalf("token list:\n%s", list)
	}
	asAdmin("auth", "token", "revoke", strings.Fields(lines[1])[0])
	_, err = team(ci, "get", "vms", "-n", "team-a")
	wantRefusal(err, codes.Unauthenticated)

	audit := asAdmin("audit", "--namespace", "team-a", "-o", "json")
	for _, w := range []string{`"identity":"serviceaccount team-a/deployer"`, "VirtualMachines/Create", "ResourceExhausted", `"identity":"user alice"`} {
		if !strings.Contains(audit, w) {
			t.Errorf("the audit log lacks %s:\n%s", w, audit)
		}
	}
	if secret := strings.TrimSpace(token); strings.Contains(audit, secret[strings.Index(secret, ".")+1:]) {
		t.Error("the audit log holds the token's secret")
	}
}
