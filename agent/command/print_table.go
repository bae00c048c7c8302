package command

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/util/duration"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// none fills empty cells so that every row has the same number of words
// for awk and friends, as kubectl does.
const none = "<none>"

// tableHeader returns the columns for res; withNamespace adds NAMESPACE
// (get -A) for namespaced kinds.
func tableHeader(res *resource, withNamespace bool) []string {
	cols := slices.Clone(res.columns)
	if withNamespace && res.Namespaced {
		cols = append([]string{"NAMESPACE"}, cols...)
	}
	return cols
}

// tableRow renders obj, of res, for the columns of tableHeader; now fixes
// AGE.
func tableRow(res *resource, obj object, now time.Time, withNamespace bool) []string {
	row := res.calls.row(obj, now)
	if withNamespace && res.Namespaced {
		row = append([]string{obj.GetMetadata().GetNamespace()}, row...)
	}
	return row
}

// wideHeader returns the columns -o wide adds at the end of res's table,
// as kubectl's wide does (res.wideColumns); most kinds add none.
func wideHeader(res *resource) []string {
	return slices.Clone(res.wideColumns)
}

// wideCells renders obj, of res, for the columns of wideHeader.
func wideCells(res *resource, obj object) []string {
	if res.calls.wide == nil {
		return nil
	}
	return res.calls.wide(obj)
}

func findCondition(conds []*apiv1.Condition, typ string) *apiv1.Condition {
	for _, c := range conds {
		if c.GetType() == typ {
			return c
		}
	}
	return nil
}

func age(ts *timestamppb.Timestamp, now time.Time) string {
	if ts == nil {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(ts.AsTime()))
}

// timestampCell is ts in UTC, RFC 3339 (a point in time, not an age).
func timestampCell(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return none
	}
	return ts.AsTime().UTC().Format(time.RFC3339)
}

func count(n int32) string { return strconv.FormatInt(int64(n), 10) }

func boolString(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

func cell(s string) string {
	if s == "" {
		return none
	}
	return s
}

// printTable writes header and rows aligned like kubectl.
func printTable(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	for _, r := range append([][]string{header}, rows...) {
		if _, err := fmt.Fprintln(tw, strings.Join(r, "\t")); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// streamTable prints rows one at a time (get -w), so a tabwriter, which
// aligns only what it has buffered, does not fit. Columns start at a
// sensible width and only grow, which keeps most rows aligned.
type streamTable struct {
	w      io.Writer
	widths []int
}

// minWidths are starting column widths for typical values.
var minWidths = map[string]int{
	"NAMESPACE": 10, "NAME": 20, "AGE": 5, "STATUS": 12, "PHASE": 10,
	"IP": 15, "IPS": 15, "NODENAME": 12, "CPU": 4, "MEMORY": 8, "VMI": 12, "SOURCE": 8, "TARGET": 8,
}

func newStreamTable(w io.Writer, header []string) (*streamTable, error) {
	t := &streamTable{w: w, widths: make([]int, len(header))}
	for i, h := range header {
		t.widths[i] = max(len(h), minWidths[h])
	}
	return t, t.row(header)
}

func (t *streamTable) row(cells []string) error {
	var b strings.Builder
	for i, c := range cells {
		if i == len(cells)-1 {
			b.WriteString(c)
			break
		}
		n := utf8.RuneCountInString(c)
		if i < len(t.widths) && n > t.widths[i] {
			t.widths[i] = n
		}
		b.WriteString(c)
		if i < len(t.widths) {
			b.WriteString(strings.Repeat(" ", t.widths[i]-n))
		}
		b.WriteString("   ")
	}
	b.WriteString("\n")
	_, err := io.WriteString(t.w, b.String())
	return err
}
