package command

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagewait"
)

// Following the nodes' pulls of an Image (image create --wait, image get
// NAME -w): imagewait follows the Image's and the nodes' watches and
// judges; this is the view, a line per node, redrawn in place on a
// terminal.

// followPulls shows the pulls of start from its version on (watches
// that fail are opened again, see imagewait.Watcher). With untilDone it
// returns once every ready, schedulable node has the image (nil) or one
// failed to pull it (*imagewait.PullError); otherwise it follows until
// ctx ends or the Image is deleted (codes.NotFound).
func followPulls(ctx context.Context, c *client.Client, start *apiv1.Image, view *pullView, untilDone bool) (imagewait.Verdict, error) {
	w := imagewait.Watcher{Images: c.Images, Nodes: c.Nodes}
	show := func(img *apiv1.Image, v imagewait.Verdict) error { return view.show(img, v.Targets) }
	run := w.Follow
	if untilDone {
		run = w.Wait
	}
	_, v, err := run(ctx, start, show)
	return v, err
}

// plainInterval is how often, at most, a node's progress is printed
// when the output is not a terminal (a log, CI).
const plainInterval = 5 * time.Second

// barWidth is the width of a progress bar, brackets excluded.
const barWidth = 24

// pullView prints a line per node: on a terminal a progress bar each,
// redrawn in place; elsewhere plain lines, a node's at most every
// plainInterval unless its phase changed.
type pullView struct {
	w   io.Writer
	tty bool
	now func() time.Time

	drawn  []string // the lines on the terminal now
	height int      // lines the drawing takes up, cleared ones included
	// printed is what was last printed per node (not a terminal).
	printed map[string]printedPull
}

type printedPull struct {
	phase, line string
	at          time.Time
}

func newPullView(w io.Writer, tty bool, now func() time.Time) *pullView {
	return &pullView{w: w, tty: tty, now: now, printed: map[string]printedPull{}}
}

// pullRow is one node's line.
type pullRow struct {
	node  string
	entry *apiv1.ImageNodeStatus // nil: not started
}

// rows are the targets and every node that reported, sorted.
func pullRows(img *apiv1.Image, targets []string) []pullRow {
	var rows []pullRow
	seen := map[string]bool{}
	for _, e := range imagewait.Entries(img) {
		rows = append(rows, pullRow{node: e.GetNode(), entry: e})
		seen[e.GetNode()] = true
	}
	for _, n := range targets {
		if !seen[n] {
			rows = append(rows, pullRow{node: n})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].node < rows[j].node })
	return rows
}

func (v *pullView) show(img *apiv1.Image, targets []string) error {
	rows := pullRows(img, targets)
	width := 0
	for _, r := range rows {
		width = max(width, len(r.node))
	}
	if v.tty {
		lines := make([]string, len(rows))
		for i, r := range rows {
			lines[i] = fmt.Sprintf("%-*s  %s  %s", width, r.node, pullBar(r.entry), pullSummary(r.entry))
		}
		return v.redraw(lines)
	}
	now := v.now()
	var b strings.Builder
	for _, r := range rows {
		phase := r.entry.GetPhase()
		line := r.node + ": " + pullSummary(r.entry)
		last, ok := v.printed[r.node]
		switch {
		case !ok, last.phase != phase:
		case line != last.line && now.Sub(last.at) >= plainInterval:
		default:
			continue
		}
		v.printed[r.node] = printedPull{phase: phase, line: line, at: now}
		b.WriteString(line + "\n")
	}
	_, err := io.WriteString(v.w, b.String())
	return err
}

// redraw replaces the lines drawn last time with lines, in place: the
// cursor goes up over the old lines, each is cleared and rewritten. Old
// lines beyond the new ones (a node left) are cleared and still counted,
// so the next redraw starts at the same place.
func (v *pullView) redraw(lines []string) error {
	if slices.Equal(lines, v.drawn) {
		return nil
	}
	var b strings.Builder
	if v.height > 0 {
		fmt.Fprintf(&b, "\x1b[%dA", v.height)
	}
	for _, l := range lines {
		b.WriteString("\r\x1b[2K" + l + "\n")
	}
	for i := len(lines); i < v.height; i++ {
		b.WriteString("\r\x1b[2K\n")
	}
	v.height = max(v.height, len(lines))
	v.drawn = append([]string(nil), lines...)
	_, err := io.WriteString(v.w, b.String())
	return err
}

// pullBar is "[#########...............]": full when the node has the
// image, empty until the size is known.
func pullBar(e *apiv1.ImageNodeStatus) string {
	filled := 0
	switch {
	case e.GetPhase() == validation.ImagePhaseReady:
		filled = barWidth
	case e.GetBytesTotal() > 0:
		filled = int(min(e.GetBytesDone(), e.GetBytesTotal()) * barWidth / e.GetBytesTotal())
	}
	return "[" + strings.Repeat("#", filled) + strings.Repeat(".", barWidth-filled) + "]"
}

// pullSummary says what a node's pull is doing.
func pullSummary(e *apiv1.ImageNodeStatus) string {
	switch e.GetPhase() {
	case validation.ImagePhaseReady:
		s := "Ready"
		if sz := e.GetSizeBytes(); sz > 0 {
			s += " " + imagewait.Bytes(sz)
		}
		if sum := e.GetSha256(); len(sum) >= 12 {
			s += ", sha256 " + sum[:12]
		}
		return s
	case validation.ImagePhaseFailed:
		return fmt.Sprintf("Failed (attempt %d): %s", e.GetAttempts(), e.GetMessage())
	case validation.ImagePhasePulling:
		return "Pulling (" + imagewait.Progress(e) + ")"
	}
	return "waiting to start"
}
