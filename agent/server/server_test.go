package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

func startAgent(t *testing.T, o Options) *Agent {
	t.Helper()
	dir := t.TempDir()
	if o.DataDir == "" {
		o.DataDir = filepath.Join(dir, "data")
	}
	if o.Socket == "" {
		o.Socket = filepath.Join(dir, "agent.sock")
	}
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		a.Shutdown(ctx)
	})
	return a
}

func listVMs(ctx context.Context, t *testing.T, cfg client.Config) error {
	t.Helper()
	c, err := client.Dial(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.VMs.List(ctx, &apiv1.ListVirtualMachinesRequest{})
	return err
}

func TestTCPRequiresToken(t *testing.T) {
	a := startAgent(t, Options{Listen: "127.0.0.1:0", LeaderElect: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	pkiDir := filepath.Join(a.opts.DataDir, "pki")
	tokenBytes, err := os.ReadFile(filepath.Join(pkiDir, "token"))
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tokenBytes))
	tcp := client.Config{Endpoint: a.TCPAddr().String(), CAFile: filepath.Join(pkiDir, "ca.crt")}

	noToken := tcp
	if err := listVMs(ctx, t, noToken); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token: want Unauthenticated, got %v", err)
	}
	wrong := tcp
	wrong.Token = strings.Repeat("0", len(token))
	if err := listVMs(ctx, t, wrong); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("wrong token: want Unauthenticated, got %v", err)
	}
	right := tcp
	right.Token = token
	if err := listVMs(ctx, t, right); err != nil {
		t.Fatalf("right token: %v", err)
	}
	// Streams are guarded too.
	c, err := client.Dial(ctx, noToken)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w, err := c.VMs.Watch(ctx, &apiv1.WatchVirtualMachinesRequest{})
	if err == nil {
		_, err = w.Recv()
	}
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("watch without token: %v", err)
	}
	// A client that does not trust our CA does not get through.
	untrusted := right
	untrusted.CAFile = ""
	if err := listVMs(ctx, t, untrusted); status.Code(err) != codes.Unavailable {
		t.Fatalf("untrusted CA: want Unavailable, got %v", err)
	}
	// The local socket needs no token and is private to the owner.
	if err := listVMs(ctx, t, client.Config{Endpoint: "unix://" + a.opts.Socket}); err != nil {
		t.Fatalf("unix socket: %v", err)
	}
	st, err := os.Stat(a.opts.Socket)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", st.Mode(), err)
	}
}

func TestMetricsAndLeadership(t *testing.T) {
	a := startAgent(t, Options{MetricsListen: "127.0.0.1:0", LeaderElect: true, Pprof: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if resp, err := http.Get("http://" + a.MetricsAddr().String() + "/debug/pprof/goroutine?debug=1"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("pprof: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if err := listVMs(ctx, t, client.Config{Endpoint: "unix://" + a.opts.Socket}); err != nil {
		t.Fatal(err)
	}
	var body string
	testutil.EventuallyNoError(t, 30*time.Second, "the metrics to show the leader", func() error {
		resp, err := http.Get("http://" + a.MetricsAddr().String() + "/metrics")
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		if !strings.Contains(body, "virtplane_leader 1") {
			return errors.New("virtplane_leader is not 1")
		}
		return nil
	})
	for _, want := range []string{
		"virtplane_leader 1",
		`virtplane_api_requests_total{code="OK",method="List",service="VirtualMachines"} 1`,
		"virtplane_api_request_duration_seconds_bucket",
		"virtplane_store_request_duration_seconds_bucket",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestSecondAgentOnSameSocketRefused(t *testing.T) {
	a := startAgent(t, Options{})
	o := Options{DataDir: t.TempDir(), Socket: a.opts.Socket, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if b, err := Start(context.Background(), o); err == nil {
		b.Shutdown(context.Background())
		t.Fatal("second agent took over a live socket")
	} else if !strings.Contains(err.Error(), "another agent") {
		t.Fatalf("unexpected error: %v", err)
	}
}

// A rotated token file takes effect without a restart: the new token is
// accepted and the old one refused within the check interval.
func TestTokenRotationWithoutRestart(t *testing.T) {
	a := startAgent(t, Options{Listen: "127.0.0.1:0", LeaderElect: true, CertCheckInterval: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pkiDir := filepath.Join(a.opts.DataDir, "pki")
	tokenFile := filepath.Join(pkiDir, "token")
	old, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	tcp := client.Config{Endpoint: a.TCPAddr().String(), CAFile: filepath.Join(pkiDir, "ca.crt")}
	oldCfg, newCfg := tcp, tcp
	oldCfg.Token, newCfg.Token = strings.TrimSpace(string(old)), strings.Repeat("ab", 32)
	if err := listVMs(ctx, t, oldCfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(newCfg.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyNoError(t, 10*time.Second, "the new token accepted", func() error { return listVMs(ctx, t, newCfg) })
	if err := listVMs(ctx, t, oldCfg); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("the old token after rotation: %v", err)
	}
}
