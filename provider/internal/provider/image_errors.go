package provider

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/virtplane/terraform-provider-virtplane/internal/imagewait"
)

// How virtplane_image words what goes wrong: its objectKind, the
// attribute an agent's validation error is about, and why the wait for
// the nodes' pulls ended early.

// imageKind words the diagnostics about images.
var imageKind = objectKind{noun: "image", title: "Image", one: "an image", short: "image",
	logKey: "image", importID: "NAME", attribute: imageAttributePath}

// imageAttributes maps the API's field paths to the resource's attributes.
var imageAttributes = map[string]string{
	"metadata.name": "name", "metadata.labels": "labels",
	"spec.url": "url", "spec.sha256": "sha256", "spec.format": "format", "spec.nodes": "nodes",
	"spec.max_size": "max_size",
}

// imageAttributePath finds the attribute an API field path is about
// ("spec.url.scheme" is url's).
func imageAttributePath(fieldPath string) (path.Path, bool) {
	for prefix, attr := range imageAttributes {
		if fieldPath == prefix || strings.HasPrefix(fieldPath, prefix+".") || strings.HasPrefix(fieldPath, prefix+"[") {
			return path.Root(attr), true
		}
	}
	return path.Empty(), false
}

// addWaitError explains why the wait for the nodes' pulls of image name
// ended early (err): a node failed to pull it, time ran out, the image
// disappeared, or a call failed.
func (r *imageResource) addWaitError(diags *diag.Diagnostics, err error, name string, timeout time.Duration, op string) {
	var pullErr *imagewait.PullError
	switch {
	case errors.As(err, &pullErr):
		diags.AddError("Image "+name+" could not be pulled",
			fmt.Sprintf("Node %s could not pull image %s (attempt %d): %s\n\n"+
				"The node tries again later (not while the image is above max_size or the agent's limits), but "+
				"a wrong sha256 or an unreachable url does not mend itself: fix the configuration and apply "+
				"again (the image is tainted and will be replaced; a larger max_size changes in place), or "+
				"set wait_for_nodes = false not to wait for the nodes.", pullErr.Node, name, pullErr.Attempts, pullErr.Message))
	case errors.Is(err, errWaitTimeout):
		diags.AddError("Timed out waiting for image "+name,
			fmt.Sprintf("Waited %s for every ready, schedulable node to pull image %s; %s. Raise timeouts.%s "+
				"if the download needs longer, or set wait_for_nodes = false.",
				timeout, name, strings.TrimPrefix(err.Error(), errWaitTimeout.Error()+": "), op))
	case status.Code(err) == codes.NotFound:
		diags.AddError("Image "+name+" disappeared",
			"The image was deleted by someone else while Terraform waited for the nodes to pull it.")
	default:
		r.addError(diags, err, "wait for the nodes to pull image "+name)
	}
}
