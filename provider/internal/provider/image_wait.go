package provider

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-log/tflog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// Waiting for the nodes to pull an Image with nodes = "all". The judgement
// (judgeImage) is a pure function of the Image and the nodes, testable
// without an agent; waitImage feeds it from two watches, the Image's and
// the nodes': a node that joins, leaves or stops answering changes what
// is waited for as much as a pull does.

// imagePullError is a node's report that it could not pull the image.
type imagePullError struct {
	node, message string
	attempts      int32
}

func (e *imagePullError) Error() string {
	return fmt.Sprintf("node %s could not pull it (attempt %d): %s", e.node, e.attempts, e.message)
}

// imageVerdict is judgeImage's answer.
type imageVerdict struct {
	done bool
	// err ends the wait: a node failed to pull the image.
	err error
	// targets counts the nodes waited for.
	targets int
	// state says what is still awaited, for logs and timeout messages.
	state string
}

// pullTarget says whether a node is one whose pull is waited for: ready
// (its agent answers) and schedulable (it may run the instances that
// would use the image). Others pull the image when they come back, which
// nobody can wait for.
func pullTarget(n *apiv1.Node) bool {
	st := n.GetStatus()
	return apiv1.IsConditionTrue(st.GetConditions(), apiv1.ConditionReady) && st.GetSchedulable() && !n.GetSpec().GetUnschedulable()
}

// judgeImage decides whether every target node has img, or one reported
// that it could not pull it. A node's failure ends the wait at once,
// although the node tries again: a wrong checksum or a dead URL do not
// mend themselves, and a transient failure is better reported than
// waited out in silence.
func judgeImage(img *apiv1.Image, nodes map[string]*apiv1.Node) imageVerdict {
	entries := map[string]*apiv1.ImageNodeStatus{}
	for _, e := range currentNodeEntries(img) {
		entries[e.GetNode()] = e
	}
	var targets []string
	for name, n := range nodes {
		if pullTarget(n) {
			targets = append(targets, name)
		}
	}
	sort.Strings(targets)
	v := imageVerdict{targets: len(targets)}
	var waiting []string
	for _, name := range targets {
		e := entries[name]
		switch e.GetPhase() {
		case validation.ImagePhaseReady:
		case validation.ImagePhaseFailed:
			// The node's message starts with the image's name, which the
			// diagnostic says already.
			msg := strings.TrimPrefix(e.GetMessage(), fmt.Sprintf("image %q: ", img.GetMetadata().GetName()))
			v.err = &imagePullError{node: name, message: orDefault(msg, "no reason given"), attempts: e.GetAttempts()}
			v.state = v.err.Error()
			return v
		case validation.ImagePhasePulling:
			waiting = append(waiting, fmt.Sprintf("%s (pulling: %s)", name, pullProgress(e)))
		default:
			waiting = append(waiting, name+" (not started)")
		}
	}
	if len(targets) == 0 {
		v.done, v.state = true, "no ready, schedulable node"
		return v
	}
	v.done = len(waiting) == 0
	v.state = fmt.Sprintf("%d of %d nodes have it", len(targets)-len(waiting), len(targets))
	if len(waiting) > 0 {
		v.state += "; waiting for " + strings.Join(waiting, ", ")
	}
	return v
}

// pullProgress renders a Pulling entry: "40% of 1.0 GiB, 2.0 MiB/s, 30s
// left".
func pullProgress(e *apiv1.ImageNodeStatus) string {
	s := humanBytes(e.GetBytesDone())
	if t := e.GetBytesTotal(); t > 0 {
		s = fmt.Sprintf("%d%% of %s", e.GetBytesDone()*100/t, humanBytes(t))
	}
	if r := e.GetBytesPerSecond(); r > 0 {
		s += ", " + humanBytes(r) + "/s"
	}
	if eta := e.GetEtaSeconds(); eta > 0 {
		s += ", " + (time.Duration(eta) * time.Second).String() + " left"
	}
	if a := e.GetAttempts(); a > 1 {
		s += fmt.Sprintf(", attempt %d", a)
	}
	return s
}

func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// watchReopenPause is how long a failed watch waits before it is opened
// again (a variable for tests).
var watchReopenPause = 500 * time.Millisecond

// imageUpdate is what followImage reports: a new version of the Image,
// or that it is gone (deleted, or replaced by another of the same name).
type imageUpdate struct {
	img  *apiv1.Image
	gone bool
}

// followImage sends every change of the Image start after start's
// version, re-opening the watch where it left off when it fails, until
// ctx ends or the Image is gone.
func followImage(ctx context.Context, images apiv1.ImagesClient, start *apiv1.Image, out chan<- imageUpdate) {
	name, uid := start.GetMetadata().GetName(), start.GetMetadata().GetUid()
	rv := start.GetMetadata().GetResourceVersion()
	send := func(u imageUpdate) bool {
		select {
		case out <- u:
			return !u.gone
		case <-ctx.Done():
			return false
		}
	}
	for ctx.Err() == nil {
		s, err := images.Watch(ctx, &apiv1.WatchImagesRequest{Options: &apiv1.WatchOptions{Name: name, ResourceVersion: rv}})
		if err == nil {
			// After a RESET the current object is listed again; a SYNCED
			// without it means it was deleted meanwhile.
			listed := true
			errStop := errors.New("stop")
			err = client.EachEvent(s, func(ev *apiv1.ImageEvent) error {
				if r := ev.GetResourceVersion(); r > 0 {
					rv = r
				}
				obj := ev.GetObject()
				keep := true
				switch ev.GetType() {
				case apiv1.EventType_RESET:
					listed = false
				case apiv1.EventType_SYNCED:
					if !listed {
						keep = send(imageUpdate{gone: true})
					}
				case apiv1.EventType_DELETED:
					keep = send(imageUpdate{gone: true})
				case apiv1.EventType_ADDED, apiv1.EventType_MODIFIED:
					listed = true
					if obj.GetMetadata().GetUid() != uid {
						keep = send(imageUpdate{gone: true})
					} else {
						keep = send(imageUpdate{img: obj})
					}
				}
				if !keep {
					return errStop
				}
				return nil
			})
			if errors.Is(err, errStop) {
				return
			}
		}
		if ctx.Err() == nil {
			tflog.Debug(ctx, "image watch ended; opening it again", map[string]any{"image": name, "error": fmt.Sprint(err)})
		}
		select {
		case <-ctx.Done():
		case <-time.After(watchReopenPause):
		}
	}
}

// followNodes sends the nodes' watch events, re-opening the watch when it
// fails: every (re-)opened watch starts with a RESET, then lists the
// nodes, then SYNCED.
func followNodes(ctx context.Context, nodes apiv1.NodesClient, out chan<- *apiv1.NodeEvent) {
	send := func(ev *apiv1.NodeEvent) error {
		select {
		case out <- ev:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for ctx.Err() == nil {
		s, err := nodes.Watch(ctx, &apiv1.WatchNodesRequest{Options: &apiv1.WatchOptions{}})
		if err == nil {
			if send(&apiv1.NodeEvent{Type: apiv1.EventType_RESET}) != nil {
				return
			}
			err = client.EachEvent(s, send)
		}
		if ctx.Err() == nil {
			tflog.Debug(ctx, "node watch ended; opening it again", map[string]any{"error": fmt.Sprint(err)})
		}
		select {
		case <-ctx.Done():
		case <-time.After(watchReopenPause):
		}
	}
}

// waitImage waits until judgeImage says done or failed, or ctx ends. It
// starts from start, as Create or Update returned it, and watches for
// changes after it, so that no report in between is missed (a Failed one
// lasts only until the node tries again). It returns the last Image seen
// and the verdict. An Image deleted meanwhile ends the wait with
// codes.NotFound. onChange, when set, sees every new verdict.
func waitImage(ctx context.Context, c *client.Client, start *apiv1.Image, onChange func(imageVerdict)) (*apiv1.Image, imageVerdict, error) {
	imgs := make(chan imageUpdate)
	nodeEvents := make(chan *apiv1.NodeEvent)
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); followImage(wctx, c.Images, start, imgs) }()
	go func() { defer wg.Done(); followNodes(wctx, c.Nodes, nodeEvents) }()
	// The watches end with the wait, not after it.
	defer wg.Wait()
	defer cancel()

	name := start.GetMetadata().GetName()
	img := start
	nodes := map[string]*apiv1.Node{}
	synced := false
	v := imageVerdict{state: "the nodes are not listed yet"}
	for {
		if synced {
			next := judgeImage(img, nodes)
			if next.state != v.state {
				tflog.Debug(ctx, "waiting for the nodes to pull the image", map[string]any{"image": name, "state": next.state})
				if onChange != nil {
					onChange(next)
				}
			}
			v = next
			if v.done || v.err != nil {
				return img, v, v.err
			}
		}
		select {
		case <-ctx.Done():
			return img, v, fmt.Errorf("%w: %s", errWaitTimeout, v.state)
		case u := <-imgs:
			if u.gone {
				return img, v, status.Errorf(codes.NotFound, "image %q was deleted", name)
			}
			img = u.img
		case ev := <-nodeEvents:
			switch ev.GetType() {
			case apiv1.EventType_RESET:
				nodes, synced = map[string]*apiv1.Node{}, false
			case apiv1.EventType_SYNCED:
				synced = true
			case apiv1.EventType_ADDED, apiv1.EventType_MODIFIED:
				nodes[ev.GetObject().GetMetadata().GetName()] = ev.GetObject()
			case apiv1.EventType_DELETED:
				delete(nodes, ev.GetObject().GetMetadata().GetName())
			}
		}
	}
}
