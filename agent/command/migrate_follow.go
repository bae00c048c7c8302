package command

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagewait"
)

// Following one migration (migrate --wait): the shared follower
// (follow.go) watches it, and a view of its own prints each phase on a
// line of its own and the transfer's progress on one line, redrawn in
// place on a terminal.

// migrationFollower follows migration name until it is final. A
// migration deleted or replaced before that ends the wait with an error
// ("migration X was deleted before it ended (last phase Running)").
func migrationFollower(c *client.Client, clk clock.Clock, name string) follower[*apiv1.VirtualMachineInstanceMigration, *apiv1.MigrationEvent] {
	return follower[*apiv1.VirtualMachineInstanceMigration, *apiv1.MigrationEvent]{
		what: "migration " + name,
		open: func(ctx context.Context, opts *apiv1.WatchOptions) (client.Stream[*apiv1.MigrationEvent], error) {
			return c.Migrations.Watch(ctx, &apiv1.WatchMigrationsRequest{Options: opts})
		},
		done: func(m *apiv1.VirtualMachineInstanceMigration) bool {
			return apiv1.IsMigrationFinal(m.GetStatus().GetPhase())
		},
		phase: phaseOrPending,
		clock: clk,
	}
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
