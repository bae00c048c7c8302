package driver

import (
	"context"
	"slices"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

func TestFreezeAndThaw(t *testing.T) {
	h, _ := snapGuest(t)
	ctx := context.Background()
	resp, err := h.d.Freeze(ctx, &launcherpb.FreezeRequest{ThawAfterMillis: 30_000})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{apiv1.IndicationOnline, apiv1.IndicationGuestAgent}; !slices.Equal(resp.GetIndications(), want) {
		t.Errorf("indications = %v, want %v", resp.GetIndications(), want)
	}
	if resp.GetTimeUnixMillis() != h.now.UnixMilli() {
		t.Errorf("time = %d, want %d", resp.GetTimeUnixMillis(), h.now.UnixMilli())
	}
	if sn := h.conn.snapState(); !sn.frozen || sn.freezes != 1 {
		t.Fatalf("frozen %v freezes %d after Freeze", sn.frozen, sn.freezes)
	}
	for range 2 {
		if _, err := h.d.Thaw(ctx, &launcherpb.Empty{}); err != nil {
			t.Fatal(err)
		}
	}
	if sn := h.conn.snapState(); sn.frozen {
		t.Fatal("still frozen after Thaw")
	}
	// The thaw timer was disarmed: time passing thaws nothing more.
	thaws := h.conn.snapState().thaws
	h.clk.Step(time.Hour)
	testutil.Consistently(t, 100*time.Millisecond, "no late thaw", func() bool { return h.conn.snapState().thaws == thaws })
}

// TestFreezeThawsItselfWithoutThaw: a node agent that froze the guest and
// died never leaves it frozen.
func TestFreezeThawsItselfWithoutThaw(t *testing.T) {
	h, _ := snapGuest(t)
	if _, err := h.d.Freeze(context.Background(), &launcherpb.FreezeRequest{ThawAfterMillis: 30_000}); err != nil {
		t.Fatal(err)
	}
	h.clk.Step(29 * time.Second)
	testutil.Consistently(t, 100*time.Millisecond, "frozen until the bound", func() bool { return h.conn.snapState().frozen })
	h.clk.Step(time.Second)
	testutil.Eventually(t, 5*time.Second, "thawed by the launcher", func() bool { return !h.conn.snapState().frozen })
	if sn := h.conn.snapState(); sn.thaws != 1 {
		t.Errorf("%d thaws, want 1", sn.thaws)
	}
}

func TestFreezeIndications(t *testing.T) {
	t.Run("no guest agent", func(t *testing.T) {
		h, _ := snapGuest(t)
		h.conn.setSnap(func(s *fakeSnap) { s.noAgent = true })
		resp, err := h.d.Freeze(context.Background(), &launcherpb.FreezeRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{apiv1.IndicationOnline, apiv1.IndicationNoGuestAgent}; !slices.Equal(resp.GetIndications(), want) {
			t.Errorf("indications = %v, want %v", resp.GetIndications(), want)
		}
		if _, err := h.d.Thaw(context.Background(), &launcherpb.Empty{}); err != nil {
			t.Errorf("thaw without a guest agent: %v", err)
		}
	})
	t.Run("paused", func(t *testing.T) {
		h, _ := snapGuest(t)
		if _, err := h.d.Pause(context.Background(), &launcherpb.Empty{}); err != nil {
			t.Fatal(err)
		}
		resp, err := h.d.Freeze(context.Background(), &launcherpb.FreezeRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{apiv1.IndicationOnline, apiv1.IndicationPaused}; !slices.Equal(resp.GetIndications(), want) {
			t.Errorf("indications = %v, want %v", resp.GetIndications(), want)
		}
		if h.conn.callsMatching("FSFreeze") != 0 {
			t.Error("froze a paused guest")
		}
	})
	t.Run("not running", func(t *testing.T) {
		h := newHarness(t)
		_, err := h.d.Freeze(context.Background(), &launcherpb.FreezeRequest{})
		wantCode(t, err, codes.FailedPrecondition, "freeze")
		if _, err := h.d.Thaw(context.Background(), &launcherpb.Empty{}); err != nil {
			t.Errorf("thaw of a domain that does not run: %v", err)
		}
	})
}
