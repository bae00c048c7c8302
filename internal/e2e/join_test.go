package e2e

import (
	"regexp"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// TestNodeJoinsOverTLS: a node agent with no credential but a bootstrap
// token joins over TLS on 127.0.0.1 (pinning the server's CA), runs a VM
// by its certificate alone, and is cut off within one heartbeat when its
// certificate is revoked.
func TestNodeJoinsOverTLS(t *testing.T) {
	t.Parallel()
	const beat = 2 * time.Second
	c := newCluster(t, clusterOptions{tls: true, heartbeat: beat, nodeLease: 30 * time.Second})
	c.create(c.guestVM("web", apiv1.RunStrategyAlways, testguest.Cmdline(testguest.Hostname("vp-e2e-join"))))
	vmi := c.waitRunning("web", "")
	c.console(vmi.GetMetadata().GetUid()).waitMarker(testguest.MarkerBooted, bootTimeout)

	n, err := c.api.Nodes.Get(c.ctx, &apiv1.GetNodeRequest{Name: c.node})
	if err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	if _, err := c.api.Nodes.Revoke(c.ctx, &apiv1.RevokeNodeRequest{Name: c.node}); err != nil {
		t.Fatal(err)
	}
	// One heartbeat may have been in flight when the revocation landed;
	// after that none is accepted.
	var last time.Time
	testutil.Eventually(t, 3*beat, "a heartbeat refused", func() bool {
		cur, err := c.api.Nodes.Get(c.ctx, &apiv1.GetNodeRequest{Name: c.node})
		if err != nil {
			t.Fatal(err)
		}
		hb := cur.GetStatus().GetHeartbeat().AsTime()
		if hb.After(last) {
			last = hb
			return false
		}
		return time.Since(revoked) > beat+time.Second
	})
	testutil.Consistently(t, 3*beat, "no heartbeat accepted after revocation", func() bool {
		cur, err := c.api.Nodes.Get(c.ctx, &apiv1.GetNodeRequest{Name: c.node})
		return err == nil && !cur.GetStatus().GetHeartbeat().AsTime().After(last)
	})
	if d := last.Sub(revoked); d > beat {
		t.Errorf("a heartbeat was accepted %s after the revocation, more than one interval (%s)", d, beat)
	}
	t.Logf("joined node ran the VM; heartbeats stopped %s after revocation (first heartbeat %s)",
		last.Sub(revoked).Round(time.Millisecond), n.GetStatus().GetHeartbeat().AsTime().Format(time.RFC3339))
	if len(c.agentLogMatches(1, reCertRevoked)) == 0 {
		t.Error("the node agent's log does not say its certificate was refused")
	}
}

var reCertRevoked = regexp.MustCompile(`revoked|Unauthenticated`)
