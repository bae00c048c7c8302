package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagewait"
	"github.com/virtplane/terraform-provider-virtplane/internal/termraw"
)

// The image create|get|delete commands work on the API's Images: images
// that nodes download by URL into their image directory (all at once, or
// each when an instance placed there needs one), as opposed to image
// import|list|remove, which work on one node's directory directly.

// defaultImageWaitTimeout bounds create --wait: room for a few GiB.
const defaultImageWaitTimeout = 20 * time.Minute

type imageCreateOptions struct {
	*rootOptions
	url, sha256, format, nodes string
	maxSize                    string
	labels                     map[string]string
	wait                       bool
	timeout                    time.Duration
	// isTTY and now are replaced by tests.
	isTTY func(io.Writer) bool
	now   func() time.Time
}

func newImageCreateCommand(root *rootOptions) *cobra.Command {
	o := &imageCreateOptions{rootOptions: root, isTTY: isTerminal, now: time.Now}
	cmd := &cobra.Command{
		Use:   "create NAME --url URL",
		Short: "Create an Image that nodes download from a URL (through the agent)",
		Long: `Create an Image: nodes download it from --url into their image directory
as NAME (a DNS-1123 subdomain such as debian-12.qcow2), where VM disks
name it like any other image. With --nodes all every node pulls it now
(and nodes that join later); otherwise a node pulls it when an instance
placed there needs it.

With --wait (and --nodes all) the command shows each node's download and
returns once every ready, schedulable node has the image, or fails with
the reason a node gives (a checksum mismatch, an unreachable URL).`,
		Example: `  virtplane-agent image create debian-12.qcow2 \
    --url https://cloud.debian.org/images/cloud/bookworm/latest/debian-12-genericcloud-amd64.qcow2 \
    --sha256 5da2... --nodes all --wait`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.url, "url", "", "https://, http:// or file:// URL the nodes download the image from (required)")
	f.StringVar(&o.sha256, "sha256", "", "SHA-256 (hex) the download must have")
	f.StringVar(&o.format, "format", "", "qcow2 or raw (default: from a .qcow2 or .raw name, else what qemu-img detects)")
	f.StringVar(&o.nodes, "nodes", "", `"all" pulls it on every node now; empty pulls it on demand`)
	f.StringVar(&o.maxSize, "max-size", "", "the most a node downloads of it, e.g. 20Gi (default: the server's --image-max-size; at most its --image-max-size-cap)")
	f.StringToStringVar(&o.labels, "label", nil, "label of the image, key=value (repeatable)")
	f.BoolVar(&o.wait, "wait", false, "with --nodes all: show the downloads and wait until every ready, schedulable node has the image")
	f.DurationVar(&o.timeout, "timeout", defaultImageWaitTimeout, "how long --wait waits")
	_ = cmd.MarkFlagRequired("url")
	return cmd
}

func (o *imageCreateOptions) run(ctx context.Context, out, errOut io.Writer, name string) error {
	if o.wait && o.nodes != validation.ImageNodesAll {
		return errors.New("--wait needs --nodes all: an image pulled on demand is pulled when an instance needs it, and the instance waits for it")
	}
	img := &apiv1.Image{
		Metadata: &apiv1.ObjectMeta{Name: name, Labels: o.labels},
		Spec:     &apiv1.ImageSpec{Url: o.url, Sha256: o.sha256, Format: o.format, Nodes: o.nodes, MaxSize: o.maxSize},
	}
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	created, err := c.Images.Create(ctx, &apiv1.CreateImageRequest{Image: img})
	if err != nil {
		return describeError(err, imageResource, name)
	}
	if _, err := fmt.Fprintf(out, "image/%s created\n", name); err != nil || !o.wait {
		return err
	}

	deadline := time.Now().Add(o.timeout)
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	view := newPullView(errOut, o.isTTY(errOut), o.now)
	v, err := followPulls(wctx, c, created, view, true)
	var pe *imagewait.PullError
	switch {
	case err == nil && len(v.Targets) == 0:
		_, err = fmt.Fprintf(out, "image/%s: no node is ready and schedulable, nothing to wait for; nodes pull it when they become ready\n", name)
		return err
	case err == nil:
		_, err = fmt.Fprintf(out, "image/%s ready on %d of %d nodes\n", name, len(v.Targets), len(v.Targets))
		return err
	case errors.As(err, &pe):
		return fmt.Errorf("%w (virtplane-agent image get %s -w follows the nodes' pulls)", pe, name)
	case interrupted(ctx, err):
		return nil
	case errors.Is(wctx.Err(), context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded || !time.Now().Before(deadline):
		return fmt.Errorf("timed out after %s waiting for the nodes to pull image %q: %s", o.timeout, name, v.State)
	}
	return describePullsError(err, name)
}

func newImageGetCommand(root *rootOptions) *cobra.Command {
	o := &getOptions{rootOptions: root, now: time.Now}
	cmd := &cobra.Command{
		Use:   "get [NAME]",
		Short: "Display Images and the nodes' pulls of them (through the agent)",
		Long: `Display Images: NODES counts the nodes that have the image against those
that pulled, are pulling or failed to pull it (with --nodes all: every
ready, schedulable node); SIZE is the downloaded file's.

With -w and a NAME it follows each node's download (a progress bar per
node on a terminal) until interrupted; without a NAME it prints a row
whenever an Image changes.`,
		Example: `  virtplane-agent image get
  virtplane-agent image get debian-12.qcow2 -o yaml
  virtplane-agent image get debian-12.qcow2 -w`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(o.output); err != nil {
				return err
			}
			var name string
			if len(args) == 1 {
				name = args[0]
			}
			if name != "" && o.selector != "" {
				return errors.New("a name cannot be combined with a label selector")
			}
			return o.runImages(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), name)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", formatTable, "output format: table, json or yaml")
	f.StringVarP(&o.selector, "selector", "l", "", "label selector, e.g. os=debian")
	f.BoolVarP(&o.watch, "watch", "w", false, "follow the pulls of NAME, or print Images as they change")
	return cmd
}

// runImages is get for Images, from image get and from get images.
func (o *getOptions) runImages(ctx context.Context, out, errOut io.Writer, name string) error {
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if o.watch && name != "" && o.output == formatTable {
		return o.followImage(ctx, c, errOut, name)
	}
	nodes, err := c.Nodes.List(ctx, &apiv1.ListNodesRequest{})
	if err != nil {
		return describeError(err, nil, "")
	}
	if o.watch {
		return o.watchImages(ctx, c, out, name, nodes.GetItems())
	}
	var items []*apiv1.Image
	if name != "" {
		img, err := c.Images.Get(ctx, &apiv1.GetImageRequest{Name: name})
		if err != nil {
			return describeError(err, imageResource, name)
		}
		if o.output != formatTable {
			return printObject(out, o.output, img)
		}
		items = []*apiv1.Image{img}
	} else {
		resp, err := c.Images.List(ctx, &apiv1.ListImagesRequest{LabelSelector: o.selector})
		if err != nil {
			return describeError(err, nil, "")
		}
		items = resp.GetItems()
		if o.output != formatTable {
			return printList(out, o.output, objects(items))
		}
	}
	if len(items) == 0 {
		_, err := fmt.Fprintln(errOut, noResources(""))
		return err
	}
	now := o.now()
	rows := make([][]string, len(items))
	for i, img := range items {
		rows[i] = imageRow(img, nodes.GetItems(), now)
	}
	return printTable(out, imageHeader, rows)
}

// followImage shows the pulls of Image name until interrupted.
func (o *getOptions) followImage(ctx context.Context, c *client.Client, errOut io.Writer, name string) error {
	img, err := c.Images.Get(ctx, &apiv1.GetImageRequest{Name: name})
	if err != nil {
		return describeError(err, imageResource, name)
	}
	_, err = followPulls(ctx, c, img, newPullView(errOut, isTerminal(errOut), o.now), false)
	if err == nil || interrupted(ctx, err) {
		return nil
	}
	return describePullsError(err, name)
}

// describePullsError rewords how following the pulls of Image name
// ended. NotFound is the Image deleted meanwhile, which the follower's
// message says better than "not found".
func describePullsError(err error, name string) error {
	if status.Code(err) == codes.NotFound {
		return errors.New(status.Convert(err).Message())
	}
	return describeError(err, imageResource, name)
}

// watchImages prints a row whenever an Image changes, like get -w.
func (o *getOptions) watchImages(ctx context.Context, c *client.Client, out io.Writer, name string, nodes []*apiv1.Node) error {
	var table *streamTable
	if o.output == formatTable {
		var err error
		if table, err = newStreamTable(out, imageHeader); err != nil {
			return err
		}
	}
	s, err := c.Images.Watch(ctx, &apiv1.WatchImagesRequest{Options: &apiv1.WatchOptions{Name: name, LabelSelector: o.selector}})
	if err != nil {
		return describeError(err, imageResource, name)
	}
	printed := 0
	err = client.EachEvent(s, func(ev *apiv1.ImageEvent) error {
		switch ev.GetType() {
		case apiv1.EventType_ADDED, apiv1.EventType_MODIFIED, apiv1.EventType_DELETED:
		default:
			return nil
		}
		printed++
		switch {
		case table != nil:
			return table.row(imageRow(ev.GetObject(), nodes, o.now()))
		case o.output == formatYAML && printed > 1:
			if _, err := io.WriteString(out, "---\n"); err != nil {
				return err
			}
		}
		return printObject(out, o.output, ev.GetObject())
	})
	if err == nil || interrupted(ctx, err) {
		return nil
	}
	return describeError(err, imageResource, name)
}

func newImageDeleteCommand(root *rootOptions) *cobra.Command {
	o := &deleteOptions{rootOptions: root}
	return &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete Images (through the agent); nodes then remove their copies",
		Long: `Delete Images. The agent refuses while a VM or an instance names the
image; nodes remove their copy once no instance there uses it. To remove
a file from one node's image directory, use image remove on that node.`,
		Example: `  virtplane-agent image delete debian-12.qcow2`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.deleteImages(cmd.Context(), cmd.OutOrStdout(), args)
		},
	}
}

// deleteImages is delete for Images, from image delete and from delete
// image.
func (o *deleteOptions) deleteImages(ctx context.Context, out io.Writer, names []string) error {
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, name := range names {
		if _, err := c.Images.Delete(ctx, &apiv1.DeleteImageRequest{Name: name}); err != nil {
			return describeError(err, imageResource, name)
		}
		if _, err := fmt.Fprintf(out, "image %q deleted\n", name); err != nil {
			return err
		}
	}
	return nil
}

// imageHeader is get's table for Images.
var imageHeader = []string{"NAME", "URL", "NODES", "SIZE", "AGE"}

// imageRow renders img for imageHeader; nodes decide which nodes an
// Image every node pulls is still missing on.
func imageRow(img *apiv1.Image, nodes []*apiv1.Node, now time.Time) []string {
	return []string{
		img.GetMetadata().GetName(),
		validation.RedactURL(img.GetSpec().GetUrl()),
		imageNodesCell(img, nodes),
		imageSizeCell(img),
		age(img.GetMetadata().GetCreationTimestamp(), now),
	}
}

// imageNodesCell is "2/3 Ready" (",1 Failed" when some failed): the nodes
// that have the image of those that pulled, are pulling or failed to pull
// it, plus, for an Image every node pulls, the ready, schedulable nodes
// that have not started yet.
func imageNodesCell(img *apiv1.Image, nodes []*apiv1.Node) string {
	known := map[string]bool{}
	ready, failed := 0, 0
	for _, e := range imagewait.Entries(img) {
		known[e.GetNode()] = true
		switch e.GetPhase() {
		case validation.ImagePhaseReady:
			ready++
		case validation.ImagePhaseFailed:
			failed++
		}
	}
	if img.GetSpec().GetNodes() == validation.ImageNodesAll {
		for _, n := range imagewait.Targets(nodes) {
			known[n] = true
		}
	} else if len(known) == 0 {
		return "on-demand"
	}
	s := fmt.Sprintf("%d/%d Ready", ready, len(known))
	if failed > 0 {
		s += fmt.Sprintf(",%d Failed", failed)
	}
	return s
}

// imageSizeCell is the downloaded file's size as a node that has it
// reports it, else the size a download announced.
func imageSizeCell(img *apiv1.Image) string {
	var total int64
	for _, e := range imagewait.Entries(img) {
		if e.GetPhase() == validation.ImagePhaseReady && e.GetSizeBytes() > 0 {
			return formatBytes(e.GetSizeBytes())
		}
		total = max(total, e.GetBytesTotal())
	}
	if total > 0 {
		return formatBytes(total)
	}
	return none
}

// isTerminal says whether w is a terminal, where progress is redrawn in
// place.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && termraw.IsTerminal(f)
}
