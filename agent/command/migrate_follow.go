package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagewait"
)

// Following one migration (migrate --wait): a watch of it by name,
// opened again where it left off when it fails, and a view that prints
// each phase on a line of its own and the transfer's progress on one
// line, redrawn in place on a terminal.

// migrationWatchClient is the Migrations service as the watcher uses it.
type migrationWatchClient interface {
	Watch(ctx context.Context, in *apiv1.WatchMigrationsRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[apiv1.MigrationEvent], error)
}

// migrationReopenPause is how long a failed watch waits before it is
// opened again: an agent that restarts is back within moments, and the
// pause keeps a watch that fails at once from spinning.
const migrationReopenPause = 500 * time.Millisecond

type migrationWatcher struct {
	migrations migrationWatchClient
	// clock times the pauses before a watch is opened again.
	clock clock.Clock
}

// errMigrationEnded ends a stream once the migration is final.
var errMigrationEnded = errors.New("migration ended")

// wait calls show with start and every later state of the migration
// until it ends (nil), it is deleted or replaced before it ended, a
// watch fails in a way no retry mends, show fails, or ctx ends. It
// returns the last state seen.
func (w migrationWatcher) wait(ctx context.Context, start *apiv1.VirtualMachineInstanceMigration, show func(*apiv1.VirtualMachineInstanceMigration) error) (*apiv1.VirtualMachineInstanceMigration, error) {
	last := start
	if err := show(start); err != nil {
		return last, err
	}
	if apiv1.IsMigrationFinal(start.GetStatus().GetPhase()) {
		return last, nil
	}
	md := start.GetMetadata()
	rv := md.GetResourceVersion()
	gone := func(what string) error {
		return fmt.Errorf("migration %s %s before it ended (last phase %s)", md.GetName(), what, phaseOrPending(last))
	}
	for {
		s, err := w.migrations.Watch(ctx, &apiv1.WatchMigrationsRequest{Options: &apiv1.WatchOptions{
			Namespace: md.GetNamespace(), Name: md.GetName(), ResourceVersion: rv,
		}})
		if err == nil {
			// After a RESET the migration is listed again; a SYNCED
			// without it means it was deleted meanwhile.
			listed := true
			err = client.EachEvent(s, func(ev *apiv1.MigrationEvent) error {
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
				case apiv1.IsMigrationFinal(obj.GetStatus().GetPhase()):
					return errMigrationEnded
				case ev.GetType() == apiv1.EventType_DELETED:
					return gone("was deleted")
				}
				return nil
			})
			if errors.Is(err, errMigrationEnded) {
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
		case <-w.clock.After(migrationReopenPause):
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

// migrationView prints a migration's phases, a line each, and its
// progress: on a terminal one line redrawn in place, elsewhere a line
// at most every plainInterval.
type migrationView struct {
	w   io.Writer
	tty bool
	now func() time.Time

	head     string // the phase line printed last
	progress string // the progress line printed last
	at       time.Time
	partial  bool // a progress line is on the terminal without its newline
}

func newMigrationView(w io.Writer, tty bool, now func() time.Time) *migrationView {
	return &migrationView{w: w, tty: tty, now: now}
}

func (v *migrationView) show(m *apiv1.VirtualMachineInstanceMigration) error {
	var b strings.Builder
	if head := migrationHeadline(m); head != v.head {
		if v.partial {
			b.WriteString("\r\x1b[2K")
			v.partial = false
		}
		b.WriteString(head + "\n")
		v.head, v.progress = head, ""
	}
	if p := migrationProgressLine(m.GetStatus().GetMigrationState().GetProgress()); p != "" && p != v.progress {
		now := v.now()
		switch {
		case v.tty:
			b.WriteString("\r\x1b[2K  " + p)
			v.partial = true
		case v.progress == "" || now.Sub(v.at) >= plainInterval:
			b.WriteString("  " + p + "\n")
		default:
			p = v.progress // not printed: keep the last printed one
		}
		if p != v.progress {
			v.progress, v.at = p, now
		}
	}
	_, err := io.WriteString(v.w, b.String())
	return err
}

// finish ends a progress line left open on the terminal.
func (v *migrationView) finish() {
	if v.partial {
		_, _ = io.WriteString(v.w, "\n")
		v.partial = false
	}
}

// migrationHeadline is a phase line: "Scheduling: Unschedulable: ...",
// "Running: node-a -> node-b".
func migrationHeadline(m *apiv1.VirtualMachineInstanceMigration) string {
	st := m.GetStatus()
	line := phaseOrPending(m)
	src, dst := st.GetMigrationState().GetSourceNode(), st.GetTargetNode()
	if dst == "" {
		dst = st.GetMigrationState().GetTargetNode()
	}
	switch {
	case src != "" && dst != "":
		line += ": " + src + " -> " + dst
	case dst != "":
		line += ": target " + dst
	}
	if why := joinNonEmpty(": ", st.GetReason(), st.GetMessage()); why != "" && st.GetPhase() != apiv1.MigrationSucceeded {
		line += " (" + why + ")"
	}
	return line
}

// migrationProgressLine is "812.0 MiB of 2.0 GiB remaining (58% sent),
// 45.3 MiB/s", empty before the source reported any.
func migrationProgressLine(p *apiv1.MigrationProgress) string {
	total := p.GetDataTotalBytes()
	if total <= 0 {
		return ""
	}
	s := fmt.Sprintf("%s of %s remaining (%s sent)", imagewait.Bytes(p.GetDataRemainingBytes()), imagewait.Bytes(total), percentDone(p))
	if r := p.GetMemoryBytesPerSecond(); r > 0 {
		s += fmt.Sprintf(", %.1f MiB/s", float64(r)/(1<<20))
	}
	return s
}

// percentDone is the share of the total no longer remaining, "42%";
// empty before the total is known. Not the processed bytes: zero pages
// count in the total but cost next to nothing to send, so a finished job
// may have "processed" 40% of its total.
func percentDone(p *apiv1.MigrationProgress) string {
	total := p.GetDataTotalBytes()
	if total <= 0 {
		return ""
	}
	left := min(max(p.GetDataRemainingBytes(), 0), total)
	return fmt.Sprintf("%d%%", (total-left)*100/total)
}

// migrationRow is a migration's line of get migrations.
func migrationRow(m *apiv1.VirtualMachineInstanceMigration, now time.Time) []string {
	st := m.GetStatus()
	target := st.GetTargetNode()
	if target == "" {
		target = st.GetMigrationState().GetTargetNode()
	}
	return []string{
		m.GetMetadata().GetName(),
		cell(m.GetSpec().GetVmiName()),
		phaseOrPending(m),
		cell(st.GetMigrationState().GetSourceNode()),
		cell(target),
		cell(percentDone(st.GetMigrationState().GetProgress())),
		age(m.GetMetadata().GetCreationTimestamp(), now),
	}
}
