package command

import (
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestFormatOfOutput(t *testing.T) {
	for path, want := range map[string]string{
		"disk.qcow2": apiv1.ExportFormatQcow2, "disk.img.gz": apiv1.ExportFormatGzip, "disk.img": apiv1.ExportFormatRaw, "disk": apiv1.ExportFormatRaw,
	} {
		if got := formatOfOutput(path); got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}
}

func TestByteProgressLine(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	p := newByteProgress(nil, false, 64<<20, clk)
	p.done.Store(16 << 20)
	got := p.line(4*time.Second, false)
	if want := "16Mi of 64Mi (25%) at 4Mi/s, ETA 12s\n"; got != want {
		t.Errorf("line %q, want %q", got, want)
	}
	if got := p.line(4*time.Second, true); !strings.HasSuffix(got, " in 4s\n") || strings.Contains(got, "ETA") {
		t.Errorf("final line %q", got)
	}
	unknown := newByteProgress(nil, true, -1, clk)
	unknown.done.Store(1 << 20)
	if got := unknown.line(time.Second, false); got != "\r\033[K1Mi at 1Mi/s" {
		t.Errorf("terminal line of an unknown total %q", got)
	}
}

func TestExportSourceObject(t *testing.T) {
	s := exportSource{ttl: 30 * time.Minute}
	e := s.object("ns", "db")
	if e.GetMetadata().GetName() != "db" || e.GetSpec().GetSourceKind() != apiv1.KindVirtualMachine || e.GetSpec().GetSourceName() != "db" || e.GetSpec().GetTtlDuration() != "30m0s" {
		t.Errorf("VM export %v", e)
	}
	s.snapshot = "before"
	e = s.object("ns", "db")
	if e.GetMetadata().GetName() != "before" || e.GetSpec().GetSourceKind() != apiv1.KindSnapshot || e.GetSpec().GetSourceName() != "before" {
		t.Errorf("snapshot export %v", e)
	}
}

// A resumed transfer's rate counts only what this run sent, not the
// offset it resumed at (image upload after a broken connection).
func TestByteProgressRateAfterResume(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	var out strings.Builder
	p := newByteProgress(&out, false, 64<<20, clk)
	p.done.Store(48 << 20)
	stop := p.start()
	_, _ = p.Write(make([]byte, 16<<20))
	clk.Step(4 * time.Second)
	stop()
	if want := "64Mi of 64Mi (100%) at 4Mi/s in 4s\n"; out.String() != want {
		t.Errorf("final line %q, want %q", out.String(), want)
	}
}
