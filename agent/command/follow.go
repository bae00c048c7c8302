package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// Following one object until it ends (snapshot, restore, clone and
// migrate --wait): a watch of it by name, opened again from the last
// version seen when it breaks (an agent that restarts); and, for the
// kinds that report phases rather than a moving progress, a view that
// prints each new fact about it on a line of its own.

// followEvent is the event message of one kind's Watch stream.
type followEvent[T object] interface {
	watchEvent[T]
	GetResourceVersion() int64
}

// follower follows one object of kind T by name.
type follower[T object, E followEvent[T]] struct {
	// what names the object in messages: "snapshot demo-1".
	what string
	open func(ctx context.Context, opts *apiv1.WatchOptions) (client.Stream[E], error)
	// done says whether the object has reached a state the wait ends in.
	done func(T) bool
	// phase is the object's phase for messages.
	phase func(T) string
	// clock times the pauses before a watch is opened again.
	clock clock.Clock
}

// followReopenPause is how long a failed watch waits before it is
// opened again: an agent that restarts is back within moments, and the
// pause keeps a watch that fails at once from spinning.
const followReopenPause = 500 * time.Millisecond

// errFollowDone ends a stream once the object is done.
var errFollowDone = errors.New("done")

// wait calls show with start and every later state of the object until
// done says so (nil), it is deleted or replaced first, a watch fails in a
// way no retry mends, show fails, or ctx ends. It returns the last state
// seen.
func (f follower[T, E]) wait(ctx context.Context, start T, show func(T) error) (T, error) {
	last := start
	if err := show(start); err != nil {
		return last, err
	}
	if f.done(start) {
		return last, nil
	}
	md := start.GetMetadata()
	rv := md.GetResourceVersion()
	gone := func(what string) error {
		return fmt.Errorf("%s %s before it ended (last phase %s)", f.what, what, f.phase(last))
	}
	for {
		s, err := f.open(ctx, &apiv1.WatchOptions{Namespace: md.GetNamespace(), Name: md.GetName(), ResourceVersion: rv})
		if err == nil {
			// After a RESET the object is listed again; a SYNCED
			// without it means it was deleted meanwhile.
			listed := true
			err = client.EachEvent(s, func(ev E) error {
				obj := ev.GetObject()
				if r := max(ev.GetResourceVersion(), obj.GetMetadata().GetResourceVersion()); r > 0 {
					rv = r
				}
				switch ev.GetType() {
				case apiv1.EventType_RESET:
					listed = false
					return nil
				case apiv1.EventType_SYNCED:
					if !listed {
						return gone("was deleted")
					}
					return nil
				case apiv1.EventType_ADDED, apiv1.EventType_MODIFIED, apiv1.EventType_DELETED:
				default:
					return nil
				}
				listed = true
				if obj.GetMetadata().GetUid() != md.GetUid() {
					return gone("was replaced by another of the same name")
				}
				last = obj
				if err := show(obj); err != nil {
					return err
				}
				switch {
				case f.done(obj):
					return errFollowDone
				case ev.GetType() == apiv1.EventType_DELETED:
					return gone("was deleted")
				}
				return nil
			})
			if errors.Is(err, errFollowDone) {
				return last, nil
			}
			if _, ok := status.FromError(err); !ok && err != nil {
				return last, err // gone, or show failed
			}
		}
		if ctx.Err() != nil {
			return last, ctx.Err()
		}
		if watchPermanent(err) {
			return last, err
		}
		select {
		case <-ctx.Done():
			return last, ctx.Err()
		case <-f.clock.After(followReopenPause):
		}
	}
}

// watchPermanent says whether err is one that opening the watch again
// does not mend: the request or the caller's credentials are wrong, or
// the agent does not know the service.
func watchPermanent(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.Unimplemented, codes.NotFound:
		return true
	}
	return false
}

// followLine is one fact about an object, printed when its text changes:
// key tells which fact it is ("phase", "volumes").
type followLine struct {
	key, text string
}

// lineView prints the lines describe gives for each state, each when it
// differs from the one last printed under its key, so the output is a
// log of what changed. No redrawing: snapshots and restores report
// phases, not a progress that moves many times a second.
type lineView[T any] struct {
	w        io.Writer
	describe func(T) []followLine
	last     map[string]string
}

func newLineView[T any](w io.Writer, describe func(T) []followLine) *lineView[T] {
	return &lineView[T]{w: w, describe: describe, last: map[string]string{}}
}

func (v *lineView[T]) show(obj T) error {
	var b strings.Builder
	for _, l := range v.describe(obj) {
		if l.text == "" || v.last[l.key] == l.text {
			continue
		}
		v.last[l.key] = l.text
		b.WriteString(l.text + "\n")
	}
	_, err := io.WriteString(v.w, b.String())
	return err
}

// conditionNote is " (reason: message)" of the condition typ when it has
// either, else "".
func conditionNote(conds []*apiv1.Condition, typ string) string {
	c := findCondition(conds, typ)
	if why := joinNonEmpty(": ", c.GetReason(), c.GetMessage()); why != "" {
		return " (" + why + ")"
	}
	return ""
}

// waitFailure turns what wait returned into the command's error: nil
// when the user pressed Ctrl-C, a timeout that says what keeps going and
// how to follow it, or the error reworded.
func waitFailure(ctx, wctx context.Context, err error, timeout time.Duration, res *resource, name, phase, follow string) error {
	switch {
	case interrupted(ctx, err):
		return nil
	// The deadline also travels to the server, whose stream reset may
	// arrive before our own context notices.
	case wctx.Err() != nil || status.Code(err) == codes.DeadlineExceeded:
		return fmt.Errorf("timed out after %s waiting for %s %s (phase %s); it keeps going: `%s` follows it",
			timeout, res.Singular, name, phase, follow)
	}
	return describeError(err, res, name)
}

// stamp is the UTC time t as yyyymmddhhmmss, for default names.
func stamp(t time.Time) string {
	return t.UTC().Format("20060102150405")
}

// checkWaitTimeout refuses a --timeout that would end --wait at once.
func checkWaitTimeout(timeout time.Duration) error {
	if timeout <= 0 {
		return fmt.Errorf("--timeout must be positive, got %s", timeout)
	}
	return nil
}
