package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// Following the nodes' pulls of an Image (image create --wait, image get
// NAME -w): the Image's and the nodes' watches feed a view with a line
// per node, redrawn in place on a terminal.

// imagePullFailure is a node's report that it could not pull the image.
type imagePullFailure struct {
	node, image, message string
	attempts             int32
}

func (e *imagePullFailure) Error() string {
	return fmt.Sprintf("node %s could not pull image %q (attempt %d): %s", e.node, e.image, e.attempts, e.message)
}

// pullVerdict is where the pulls stand.
type pullVerdict struct {
	targets []string // ready, schedulable nodes
	done    bool     // every target has the image
	failed  *imagePullFailure
	state   string // who is still pulling, for timeouts
}

// judgePulls decides whether every ready, schedulable node has img, or
// one reported that it could not pull it.
func judgePulls(img *apiv1.Image, nodes map[string]*apiv1.Node) pullVerdict {
	list := make([]*apiv1.Node, 0, len(nodes))
	for _, n := range nodes {
		list = append(list, n)
	}
	v := pullVerdict{targets: pullTargets(list)}
	entries := map[string]*apiv1.ImageNodeStatus{}
	for _, e := range currentPulls(img) {
		entries[e.GetNode()] = e
	}
	var waiting []string
	for _, n := range v.targets {
		e := entries[n]
		switch e.GetPhase() {
		case validation.ImagePhaseReady:
		case validation.ImagePhaseFailed:
			// The node's message starts with the image's name, which the
			// error says already.
			msg := strings.TrimPrefix(e.GetMessage(), fmt.Sprintf("image %q: ", img.GetMetadata().GetName()))
			v.failed = &imagePullFailure{node: n, image: img.GetMetadata().GetName(), message: msg, attempts: e.GetAttempts()}
		case validation.ImagePhasePulling:
			waiting = append(waiting, n+" ("+pullDetail(e)+")")
		default:
			waiting = append(waiting, n+" (not started)")
		}
	}
	v.done = len(waiting) == 0 && v.failed == nil
	v.state = fmt.Sprintf("%d of %d nodes have it", len(v.targets)-len(waiting), len(v.targets))
	if len(waiting) > 0 {
		v.state += "; waiting for " + strings.Join(waiting, ", ")
	}
	return v
}

// followPulls shows the pulls of start from its version on. With
// untilDone it returns once every ready, schedulable node has the image
// (nil) or one failed to pull it (*imagePullFailure); otherwise it
// follows until ctx ends or the Image is deleted.
func followPulls(ctx context.Context, c *client.Client, start *apiv1.Image, view *pullView, untilDone bool) (pullVerdict, error) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	imgEvents := make(chan *apiv1.ImageEvent)
	nodeEvents := make(chan *apiv1.NodeEvent)
	errs := make(chan error, 2)
	forward := func(ch chan<- *apiv1.ImageEvent) func(*apiv1.ImageEvent) error {
		return func(ev *apiv1.ImageEvent) error {
			select {
			case ch <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	name := start.GetMetadata().GetName()
	wg.Add(2)
	go func() {
		defer wg.Done()
		opts := &apiv1.WatchOptions{Name: name, ResourceVersion: start.GetMetadata().GetResourceVersion()}
		s, err := c.Images.Watch(ctx, &apiv1.WatchImagesRequest{Options: opts})
		if err == nil {
			err = client.EachEvent(s, forward(imgEvents))
		}
		errs <- err
	}()
	go func() {
		defer wg.Done()
		s, err := c.Nodes.Watch(ctx, &apiv1.WatchNodesRequest{Options: &apiv1.WatchOptions{}})
		if err == nil {
			err = client.EachEvent(s, func(ev *apiv1.NodeEvent) error {
				select {
				case nodeEvents <- ev:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			})
		}
		errs <- err
	}()

	img := start
	nodes := map[string]*apiv1.Node{}
	synced := false
	v := pullVerdict{state: "the nodes are not listed yet"}
	for {
		if synced {
			v = judgePulls(img, nodes)
			if err := view.show(img, v.targets); err != nil {
				return v, err
			}
			if untilDone && v.failed != nil {
				return v, v.failed
			}
			if untilDone && v.done {
				return v, nil
			}
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case err := <-errs:
			if err == nil {
				err = errors.New("the agent ended the watch")
			}
			return v, err
		case ev := <-imgEvents:
			switch ev.GetType() {
			case apiv1.EventType_ADDED, apiv1.EventType_MODIFIED:
				if ev.GetObject().GetMetadata().GetUid() == start.GetMetadata().GetUid() {
					img = ev.GetObject()
					continue
				}
				fallthrough
			case apiv1.EventType_DELETED:
				return v, fmt.Errorf("image %q was deleted", name)
			}
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
	for _, e := range currentPulls(img) {
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
	if equalLines(lines, v.drawn) {
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

func equalLines(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
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
			s += " " + formatBytes(sz)
		}
		if sum := e.GetSha256(); len(sum) >= 12 {
			s += ", sha256 " + sum[:12]
		}
		return s
	case validation.ImagePhaseFailed:
		return fmt.Sprintf("Failed (attempt %d): %s", e.GetAttempts(), e.GetMessage())
	case validation.ImagePhasePulling:
		return "Pulling " + pullDetail(e)
	}
	return "waiting to start"
}

// pullDetail is "45% of 1.0Gi, 2.0Mi/s, 25s left".
func pullDetail(e *apiv1.ImageNodeStatus) string {
	if e.GetBytesDone() == 0 && e.GetBytesTotal() == 0 {
		return "(connecting)"
	}
	s := formatBytes(e.GetBytesDone())
	if t := e.GetBytesTotal(); t > 0 {
		s = fmt.Sprintf("%d%% of %s", min(e.GetBytesDone(), t)*100/t, formatBytes(t))
	}
	if r := e.GetBytesPerSecond(); r > 0 {
		s += ", " + formatBytes(r) + "/s"
	}
	if eta := e.GetEtaSeconds(); eta > 0 {
		s += ", " + (time.Duration(eta) * time.Second).String() + " left"
	}
	if a := e.GetAttempts(); a > 1 {
		s += fmt.Sprintf(", attempt %d", a)
	}
	return s
}
