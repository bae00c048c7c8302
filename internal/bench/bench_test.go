package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPercentileAndMedian(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	ds := ms(50, 10, 40, 20, 30)
	for _, c := range []struct {
		p    float64
		want time.Duration
	}{{50, 30 * time.Millisecond}, {95, 50 * time.Millisecond}, {20, 10 * time.Millisecond}, {21, 20 * time.Millisecond}} {
		if got := Percentile(ds, c.p); got != c.want {
			t.Errorf("P%.0f = %v, want %v", c.p, got, c.want)
		}
	}
	if got := Median(ms(10, 40, 20, 30)); got != 25*time.Millisecond {
		t.Errorf("median of an even count = %v, want 25ms", got)
	}
	if Percentile(nil, 50) != 0 || Median(nil) != 0 {
		t.Error("no samples should give 0")
	}
	if ds[0] != 50*time.Millisecond {
		t.Error("Percentile sorted its argument")
	}
}

func TestParseWrites(t *testing.T) {
	text := `# HELP virtplane_store_writes_total ...
virtplane_store_writes_total{kind="VirtualMachine",op="create"} 10
virtplane_store_writes_total{kind="VirtualMachine",op="update"} 20
virtplane_store_writes_total{kind="VirtualMachineInstance",op="update"} 5
virtplane_store_writes_total{kind="Node",op="update"} 3
virtplane_store_request_duration_seconds_count{kind="Node",op="get"} 99
`
	w, err := parseWrites(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if w["VirtualMachine"] != 30 || w.VMAndVMI() != 35 || w["Node"] != 3 {
		t.Errorf("writes = %v", w)
	}
	if d := w.Sub(Writes{"VirtualMachine": 10}); d["VirtualMachine"] != 20 || d["Node"] != 3 {
		t.Errorf("Sub = %v", d)
	}
}

func TestWriteDocKeepsTheOtherMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "performance.md")
	if err := os.WriteFile(path, []byte("# Performance\n\nhand-written\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	quick := &Report{Mode: "quick", Sections: []Section{{ID: "1", Title: "One", Command: "bin/virtplane-bench -mode quick one"}}}
	full := &Report{Mode: "full", Sections: []Section{{ID: "1", Title: "One", Command: "bin/virtplane-bench -mode full one"}}}
	for _, r := range []*Report{quick, full, quick} {
		if err := r.WriteDoc(path); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{"hand-written", "-mode quick one", "-mode full one"} {
		if strings.Count(page, want) != 1 {
			t.Errorf("page has %q %d times:\n%s", want, strings.Count(page, want), page)
		}
	}
}

func TestReportPutReplacesAndOrders(t *testing.T) {
	r := &Report{}
	r.Put(Section{ID: "2-b"})
	r.Put(Section{ID: "1-a", Title: "old"})
	r.Put(Section{ID: "1-a", Title: "new"})
	if len(r.Sections) != 2 || r.Sections[0].ID != "1-a" || r.Sections[0].Title != "new" {
		t.Errorf("sections = %+v", r.Sections)
	}
}
