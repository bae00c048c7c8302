package bench

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/proc"
)

func startShell(t *testing.T, script string) *proc.Proc {
	t.Helper()
	p, err := proc.Start(proc.OwnGroup, "/bin/sh", filepath.Join(t.TempDir(), "log"), "/bin/sh", "-c", script)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Kill() })
	return p
}

func TestWaitLog(t *testing.T) {
	// Found once logged, also after other lines.
	p := startShell(t, `echo 'not json'; sleep 0.2; echo '{"msg":"ready","n":3}'; exec sleep 60`)
	rec, err := WaitLog(context.Background(), p, "ready", time.Minute)
	if err != nil || rec.Str("n") != "3" {
		t.Fatalf("WaitLog = %+v, %v", rec, err)
	}

	// A process that exits without the message: an error quoting its log.
	p = startShell(t, `echo 'dying words'; exit 1`)
	if _, err := WaitLog(context.Background(), p, "ready", time.Minute); err == nil ||
		!strings.Contains(err.Error(), "exited before logging") || !strings.Contains(err.Error(), "dying words") {
		t.Fatalf("WaitLog of an exited process = %v", err)
	}

	// Neither: the timeout ends the wait, and so does the caller's ctx.
	p = startShell(t, `exec sleep 60`)
	if _, err := WaitLog(context.Background(), p, "ready", 100*time.Millisecond); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitLog past its timeout = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := WaitLog(ctx, p, "ready", time.Minute); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitLog with an ended ctx = %v", err)
	}
}
