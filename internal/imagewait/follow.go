package imagewait

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// ImageWatcher is the Images service as a Watcher uses it.
type ImageWatcher interface {
	Watch(ctx context.Context, in *apiv1.WatchImagesRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[apiv1.ImageEvent], error)
}

// NodeWatcher is the Nodes service as a Watcher uses it.
type NodeWatcher interface {
	Watch(ctx context.Context, in *apiv1.WatchNodesRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[apiv1.NodeEvent], error)
}

// ReopenPause is how long a failed watch waits before it is opened
// again: an agent that restarts is back within moments, and a pause
// keeps a watch that fails at once from spinning.
const ReopenPause = 500 * time.Millisecond

// Watcher follows an Image and the nodes. A watch that fails or ends is
// opened again after ReopenPause, the Image's from the last version
// seen, so that no report in between is missed (a Failed one lasts only
// until the node tries again); only errors that no retry mends end it.
type Watcher struct {
	Images ImageWatcher
	Nodes  NodeWatcher
	// Log, when set, hears why a watch is opened again and every new
	// state, with slog-style key/value pairs (slog.Logger.DebugContext
	// fits).
	Log func(ctx context.Context, msg string, args ...any)
	// Clock times the pauses before a watch is opened again; nil is the
	// real clock.
	Clock clock.Clock
}

// OnChange sees the Image and the verdict whenever either may have
// changed; an error it returns ends the following, returned as is.
type OnChange func(img *apiv1.Image, v Verdict) error

// Wait follows start until every target node has the image (nil error),
// a target failed to pull it (*PullError), the Image is deleted or
// replaced by another of the same name (codes.NotFound), a watch fails
// in a way no retry mends, or ctx ends (ctx's error, with the last
// verdict saying what was awaited). It returns the last Image seen and
// the last verdict. onChange may be nil.
func (w Watcher) Wait(ctx context.Context, start *apiv1.Image, onChange OnChange) (*apiv1.Image, Verdict, error) {
	return w.follow(ctx, start, onChange, true)
}

// Follow is Wait that goes on after every node has the image or one
// failed: for a view that shows the pulls until its user stops it.
func (w Watcher) Follow(ctx context.Context, start *apiv1.Image, onChange OnChange) (*apiv1.Image, Verdict, error) {
	return w.follow(ctx, start, onChange, false)
}

func (w Watcher) follow(ctx context.Context, start *apiv1.Image, onChange OnChange, untilDone bool) (*apiv1.Image, Verdict, error) {
	if w.Clock == nil {
		w.Clock = clock.RealClock{}
	}
	imgs := make(chan imageUpdate)
	nodeEvents := make(chan *apiv1.NodeEvent)
	fatal := make(chan error, 2)
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); w.followImage(wctx, start, imgs, fatal) }()
	go func() { defer wg.Done(); w.followNodes(wctx, nodeEvents, fatal) }()
	// The watches end with the wait, not after it.
	defer wg.Wait()
	defer cancel()

	name := start.GetMetadata().GetName()
	img := start
	nodes := map[string]*apiv1.Node{}
	synced := false
	v := Verdict{State: "the nodes are not listed yet"}
	for {
		if synced {
			next := Judge(img, slices.Collect(maps.Values(nodes)))
			if next.State != v.State {
				w.log(ctx, "waiting for the nodes to pull the image", "image", name, "state", next.State)
			}
			v = next
			if onChange != nil {
				if err := onChange(img, v); err != nil {
					return img, v, err
				}
			}
			switch {
			case untilDone && v.Failed != nil:
				return img, v, v.Failed
			case untilDone && v.Done:
				return img, v, nil
			}
		}
		select {
		case <-ctx.Done():
			return img, v, ctx.Err()
		case err := <-fatal:
			return img, v, err
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

func (w Watcher) log(ctx context.Context, msg string, args ...any) {
	if w.Log != nil {
		w.Log(ctx, msg, args...)
	}
}

// imageUpdate is what followImage reports: a new version of the Image,
// or that it is gone (deleted, or replaced by another of the same name).
type imageUpdate struct {
	img  *apiv1.Image
	gone bool
}

// errStop ends a stream whose follower is done.
var errStop = errors.New("stop")

// followImage sends every change of the Image after start's version,
// opening the watch again where it left off when it fails, until ctx
// ends, the Image is gone, or the watch fails for good (sent to fatal).
func (w Watcher) followImage(ctx context.Context, start *apiv1.Image, out chan<- imageUpdate, fatal chan<- error) {
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
	for {
		s, err := w.Images.Watch(ctx, &apiv1.WatchImagesRequest{Options: &apiv1.WatchOptions{Name: name, ResourceVersion: rv}})
		if err == nil {
			// After a RESET the current object is listed again; a SYNCED
			// without it means it was deleted meanwhile.
			listed := true
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
		if !w.reopen(ctx, err, fatal, "image watch", "image", name) {
			return
		}
	}
}

// followNodes sends the nodes' watch events, opening the watch again
// when it fails: every (re-)opened watch starts with a RESET, then lists
// the nodes, then SYNCED.
func (w Watcher) followNodes(ctx context.Context, out chan<- *apiv1.NodeEvent, fatal chan<- error) {
	send := func(ev *apiv1.NodeEvent) error {
		select {
		case out <- ev:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for {
		s, err := w.Nodes.Watch(ctx, &apiv1.WatchNodesRequest{Options: &apiv1.WatchOptions{}})
		if err == nil {
			if send(&apiv1.NodeEvent{Type: apiv1.EventType_RESET}) != nil {
				return
			}
			err = client.EachEvent(s, send)
		}
		if !w.reopen(ctx, err, fatal, "node watch") {
			return
		}
	}
}

// reopen decides, after a watch ended with err (nil: the server ended
// it), whether to open it again: after a pause, unless ctx ended or no
// retry mends err, which then goes to fatal.
func (w Watcher) reopen(ctx context.Context, err error, fatal chan<- error, what string, args ...any) bool {
	if ctx.Err() != nil {
		return false
	}
	if permanent(err) {
		fatal <- fmt.Errorf("%s: %w", what, err)
		return false
	}
	w.log(ctx, what+" ended; opening it again", append(args, "error", fmt.Sprint(err))...)
	select {
	case <-ctx.Done():
		return false
	case <-w.Clock.After(ReopenPause):
		return true
	}
}

// permanent says whether err is one that opening the watch again does
// not mend: the request or the caller's credentials are wrong, or the
// agent does not know the service.
func permanent(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.Unimplemented:
		return true
	}
	return false
}
