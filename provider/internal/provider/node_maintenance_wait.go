package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Waiting for a node's drain (virtplane_node_maintenance with drain =
// true). The server's evacuation controller does the work and reports it
// in status.evacuation; create only reads that report until it says
// drained. A poll, not a watch: a drain takes minutes and the report
// changes a few times per instance, so a read a second costs nothing and
// cannot miss the end.

// drainPollInterval is how often the wait reads the node (a variable for
// tests).
var drainPollInterval = time.Second

// errDrainCanceled ends a wait whose node stopped draining: it was
// uncordoned behind Terraform's back, and waiting would never end.
var errDrainCanceled = errors.New("the drain was canceled: the node was uncordoned while apply waited for it")

// waitDrained reads node name until its drain has finished, and returns
// the last node read. It fails with codes.NotFound when the node is
// deleted, errDrainCanceled when the drain is canceled, and errWaitTimeout
// (saying what was still on the node) when ctx ends. Failed reads are
// retried until then.
func waitDrained(ctx context.Context, nodes apiv1.NodesClient, name string) (*apiv1.Node, error) {
	tick := time.NewTicker(drainPollInterval)
	defer tick.Stop()
	var (
		last      *apiv1.Node
		lastState string
		lastErr   error
	)
	for {
		n, err := nodes.Get(ctx, &apiv1.GetNodeRequest{Name: name})
		switch {
		case status.Code(err) == codes.NotFound:
			return last, err
		case err != nil && ctx.Err() == nil:
			lastErr = err
			tflog.Debug(ctx, "reading the draining node failed; retrying", map[string]any{"node": name, "error": err.Error()})
		case err == nil:
			last, lastErr = n, nil
			if n.Drained() {
				return n, nil
			}
			if !n.GetSpec().GetDrain() {
				return n, errDrainCanceled
			}
			if s := drainRemaining(n); s != lastState {
				tflog.Debug(ctx, "waiting for the node to drain", map[string]any{"node": name, "remaining": s})
				lastState = s
			}
		}
		select {
		case <-ctx.Done():
			msg := drainRemaining(last)
			if lastErr != nil {
				msg += "; the last read failed: " + status.Convert(lastErr).Message()
			}
			return last, fmt.Errorf("%w: %s", errWaitTimeout, msg)
		case <-tick.C:
		}
	}
}

// drainRemaining says what keeps node n from being drained: every instance
// still on it, with the eviction strategy in force, its state and why
// ("default/web (LiveMigrate, Blocked: it is not live-migratable: ...)").
func drainRemaining(n *apiv1.Node) string {
	ev := n.GetStatus().GetEvacuation()
	switch {
	case n == nil:
		return "the node could not be read"
	case ev == nil:
		return "the evacuation controller has not reported on the drain yet"
	case len(ev.GetRemaining()) == 0:
		return "no instance is left, but the evacuation controller has not reported the node drained yet"
	}
	parts := make([]string, 0, len(ev.GetRemaining()))
	for _, e := range ev.GetRemaining() {
		parts = append(parts, e.Describe())
	}
	return strings.Join(parts, "; ")
}
