package driver

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// TestDriverThroughPlugin drives the real driver, over a fake libvirt,
// through go-plugin's gRPC boundary with the node agent's Client — the
// whole launcher minus the process and libvirtd.
func TestDriverThroughPlugin(t *testing.T) {
	h := newHarness(t)
	gc, gs := plugin.TestPluginGRPCConn(t, false, launcher.PluginSet(h.d))
	t.Cleanup(func() {
		_ = gc.Conn.Close()
		gs.Stop()
	})
	raw, err := gc.Dispense(launcher.PluginName)
	if err != nil {
		t.Fatal(err)
	}
	c := launcher.NewClient(raw.(launcherpb.LauncherClient), func() { _ = gc.Conn.Close() }, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	events, err := c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ev := <-events; ev.GetEvent() != "Current" || ev.GetStatus().GetExists() {
		t.Fatalf("first event = %v", ev)
	}
	st, err := c.Sync(ctx, vmi(apiv1.PhaseScheduled), &launcherpb.SyncOptions{DomainName: testDomain})
	if err != nil || st.GetState() != "Running" {
		t.Fatalf("Sync = %v, %v", st, err)
	}
	for ev := range events {
		if ev.GetEvent() == "Started/Booted" {
			break
		}
	}
	if st, err := c.Pause(ctx); err != nil || st.GetReason() != "User" {
		t.Fatalf("Pause = %v, %v", st, err)
	}
	if _, err := c.Delete(ctx); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Delete of a paused domain = %v", err)
	}
	if err := c.RenewLease(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Kill(ctx); err != nil || st.GetReason() != "Destroyed" {
		t.Fatalf("Kill = %v, %v", st, err)
	}
	if st, err := c.Delete(ctx); err != nil || st.GetExists() {
		t.Fatalf("Delete = %v, %v", st, err)
	}
}
