package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-log/tflog"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagewait"
)

// Waiting for the nodes to pull an Image with nodes = "all": imagewait
// judges and follows (shared with the CLI's image create --wait); this
// adapts it to the provider's logging and to errWaitTimeout, which the
// diagnostics of every wait use.

// waitImage waits until every ready, schedulable node has start, or one
// failed to pull it (*imagewait.PullError), or ctx ends (errWaitTimeout
// saying what was still awaited). It returns the last Image seen and the
// verdict; an Image deleted meanwhile ends the wait with codes.NotFound.
func waitImage(ctx context.Context, c *client.Client, start *apiv1.Image) (*apiv1.Image, imagewait.Verdict, error) {
	w := imagewait.Watcher{Images: c.Images, Nodes: c.Nodes, Log: tflogDebug}
	img, v, err := w.Wait(ctx, start, nil)
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		err = fmt.Errorf("%w: %s", errWaitTimeout, v.State)
	}
	return img, v, err
}

// tflogDebug logs slog-style key/value pairs with tflog.
func tflogDebug(ctx context.Context, msg string, args ...any) {
	fields := make(map[string]any, len(args)/2)
	for i := 0; i+1 < len(args); i += 2 {
		fields[fmt.Sprint(args[i])] = args[i+1]
	}
	tflog.Debug(ctx, msg, fields)
}
