package e2e

import (
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// --- processes ---------------------------------------------------------------

// launcherPids returns the live launcher processes of this package's
// launcher binary serving domain.
func launcherPids(domain string) []int { return procfs.LauncherPids(env.launcher, domain) }

// waitGone waits until pid has exited.
func waitGone(t *testing.T, pid int, d time.Duration) {
	t.Helper()
	testutil.Eventually(t, d, fmt.Sprintf("pid %d to exit", pid), func() bool { return !procfs.Alive(pid) })
}

// report appends a line to $VIRTPLANE_E2E_REPORT, if set, and logs it.
func report(t *testing.T, format string, args ...any) {
	t.Helper()
	line := fmt.Sprintf(format, args...)
	t.Log(line)
	path := os.Getenv(envReport)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		t.Errorf("report: %v", err)
		return
	}
	defer f.Close()
	_, _ = io.WriteString(f, time.Now().Format(time.RFC3339)+" "+t.Name()+": "+line+"\n")
}
