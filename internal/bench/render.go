package bench

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Markers around the generated part of docs/performance.md, one pair per
// mode, so that `make bench` never overwrites the full run's figures.
func markers(mode string) (begin, end string) {
	return "<!-- BEGIN GENERATED: virtplane-bench " + mode + " (do not edit; make bench" + modeSuffix(mode) + ") -->",
		"<!-- END GENERATED: virtplane-bench " + mode + " -->"
}

func modeSuffix(mode string) string {
	if mode == "full" {
		return "-full"
	}
	return ""
}

// Markdown renders the report.
func (r *Report) Markdown() string {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "Last run %s UTC on %d cores (%s), %s RAM, %s, kernel %s; libvirt %s, QEMU %s; %s; commit %s; agent data dirs on %s.\n\n",
		m.Date.Format("2006-01-02 15:04"), m.Cores, orDash(m.CPUModel), MiBToGiB(m.MemoryKiB), m.Accel, orDash(m.Kernel),
		orDash(m.LibvirtVersion), orDash(m.QEMUVersion), m.GoVersion, orDash(m.Commit), orDash(m.DataDisk))
	if targets := r.targetSummary(); targets != "" {
		b.WriteString(targets)
	}
	for _, s := range r.Sections {
		fmt.Fprintf(&b, "#### %s\n\n", s.Title)
		fmt.Fprintf(&b, "Reproduce: `%s` (run %s UTC, took %s).\n\n", s.Command, s.Started.UTC().Format("2006-01-02 15:04"), s.Took.Round(time.Second))
		for _, l := range s.Setup {
			fmt.Fprintf(&b, "- %s\n", l)
		}
		if len(s.Setup) > 0 {
			b.WriteString("\n")
		}
		if s.Error != "" {
			fmt.Fprintf(&b, "**The run failed:** `%s`\n\n", oneLine(s.Error))
		}
		for _, t := range s.Tables {
			writeTable(&b, t)
		}
		for _, t := range s.Targets {
			fmt.Fprintf(&b, "- Target %s %s: measured %s — **%s**\n", t.What, t.Goal, t.Measured, metWord(t.Met))
		}
		for _, n := range s.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
		for _, p := range s.Profiles {
			fmt.Fprintf(&b, "- Profile: `%s`\n", p)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (r *Report) targetSummary() string {
	var rows [][]string
	for _, s := range r.Sections {
		for _, t := range s.Targets {
			rows = append(rows, []string{t.What, t.Goal, t.Measured, metWord(t.Met)})
		}
	}
	if len(rows) == 0 {
		return ""
	}
	var b strings.Builder
	writeTable(&b, Table{Title: "Targets", Header: []string{"Target", "Goal", "Measured", "Result"}, Rows: rows})
	return b.String()
}

func writeTable(b *strings.Builder, t Table) {
	if t.Title != "" {
		fmt.Fprintf(b, "%s:\n\n", t.Title)
	}
	if len(t.Header) == 0 {
		return
	}
	fmt.Fprintf(b, "| %s |\n|%s\n", strings.Join(t.Header, " | "), strings.Repeat("---|", len(t.Header)))
	for _, r := range t.Rows {
		cells := make([]string, len(t.Header))
		copy(cells, r)
		for i, c := range cells {
			cells[i] = strings.ReplaceAll(c, "|", `\|`)
		}
		fmt.Fprintf(b, "| %s |\n", strings.Join(cells, " | "))
	}
	b.WriteString("\n")
}

func metWord(met bool) string {
	if met {
		return "met"
	}
	return "missed"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 600 {
		s = s[:600] + "…"
	}
	return s
}

// MiBToGiB renders a KiB count in GiB.
func MiBToGiB(kib int64) string { return fmt.Sprintf("%.1f GiB", float64(kib)/(1024*1024)) }

// WriteDoc puts the rendered report between its markers in the page at
// path; a page without them gets them appended.
func (r *Report) WriteDoc(path string) error {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	page := string(b)
	begin, end := markers(r.Mode)
	body := begin + "\n\n" + r.Markdown() + end
	i, j := strings.Index(page, begin), strings.Index(page, end)
	switch {
	case i >= 0 && j > i:
		page = page[:i] + body + page[j+len(end):]
	case i >= 0 || j >= 0:
		return fmt.Errorf("%s: only one of the markers %q and %q; fix the page by hand", path, begin, end)
	default:
		if page != "" && !strings.HasSuffix(page, "\n") {
			page += "\n"
		}
		page += "\n" + body + "\n"
	}
	return os.WriteFile(path, []byte(page), 0o644)
}
