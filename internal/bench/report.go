package bench

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Report is the outcome of one mode (quick or full): the machine and one
// section per measurement. It is kept as JSON between runs, so that a
// single measurement can be re-run and the page rendered again.
type Report struct {
	Mode     string    `json:"mode"`
	Machine  Machine   `json:"machine"`
	Sections []Section `json:"sections"`
}

// Section is one measurement.
type Section struct {
	ID    string `json:"id"` // orders the sections: "1-start", "2-density", ...
	Title string `json:"title"`
	// Command reproduces every figure of the section.
	Command string `json:"command"`
	// Setup says what ran: which agents, which libvirt, which guests.
	Setup    []string      `json:"setup"`
	Started  time.Time     `json:"started"`
	Took     time.Duration `json:"took"`
	Tables   []Table       `json:"tables"`
	Targets  []Target      `json:"targets,omitempty"`
	Notes    []string      `json:"notes,omitempty"`
	Error    string        `json:"error,omitempty"`
	Profiles []string      `json:"profiles,omitempty"` // files written when a target was missed
}

// Table is a titled table of figures.
type Table struct {
	Title  string     `json:"title,omitempty"`
	Header []string   `json:"header"`
	Rows   [][]string `json:"rows"`
}

// Target is a goal from the issue and whether the run met it.
type Target struct {
	What     string `json:"what"`
	Goal     string `json:"goal"`
	Measured string `json:"measured"`
	Met      bool   `json:"met"`
}

// AddRow appends a row to the last table.
func (s *Section) AddRow(cells ...string) {
	if len(s.Tables) == 0 {
		s.Tables = append(s.Tables, Table{})
	}
	t := &s.Tables[len(s.Tables)-1]
	t.Rows = append(t.Rows, cells)
}

// NewTable starts a table.
func (s *Section) NewTable(title string, header ...string) {
	s.Tables = append(s.Tables, Table{Title: title, Header: header})
}

// Target records a goal.
func (s *Section) Target(what, goal, measured string, met bool) {
	s.Targets = append(s.Targets, Target{What: what, Goal: goal, Measured: measured, Met: met})
}

// Note adds a remark.
func (s *Section) Note(format string, args ...any) {
	s.Notes = append(s.Notes, fmt.Sprintf(format, args...))
}

// MissedTargets reports whether any target of the section was missed.
func (s *Section) MissedTargets() bool {
	return slices.ContainsFunc(s.Targets, func(t Target) bool { return !t.Met })
}

// LoadReport reads path; a missing file, or one of another mode, gives an
// empty report of mode.
func LoadReport(path, mode string) (*Report, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return &Report{Mode: mode}, nil
	}
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if r.Mode != mode {
		return &Report{Mode: mode}, nil
	}
	return &r, nil
}

// Put replaces the section of the same ID, keeping sections ordered.
func (r *Report) Put(s Section) {
	r.Sections = slices.DeleteFunc(r.Sections, func(o Section) bool { return o.ID == s.ID })
	r.Sections = append(r.Sections, s)
	slices.SortFunc(r.Sections, func(a, b Section) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
}

// Save writes the report as indented JSON.
func (r *Report) Save(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
