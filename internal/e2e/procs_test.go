package e2e

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// --- processes ---------------------------------------------------------------

// launcherPids returns the live launcher processes of this package's
// launcher binary serving domain.
func launcherPids(domain string) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid := 0
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid <= 0 {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) < 2 || args[0] != env.launcher || args[1] != "serve" || !alive(pid) {
			continue
		}
		for i := 2; i+1 < len(args); i++ {
			if args[i] == "--domain-name" && args[i+1] == domain {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// qemuPid is the QEMU process of a running domain, from libvirtd's pid
// file; 0 when there is none.
func qemuPid(domain string) int {
	b, err := os.ReadFile(filepath.Join("/run/libvirt/qemu", domain+".pid"))
	if err != nil {
		return 0
	}
	pid := 0
	if _, err := fmt.Sscanf(strings.TrimSpace(string(b)), "%d", &pid); err != nil || !alive(pid) {
		return 0
	}
	return pid
}

// waitGone waits until pid has exited.
func waitGone(t *testing.T, pid int, d time.Duration) {
	t.Helper()
	testutil.Eventually(t, d, fmt.Sprintf("pid %d to exit", pid), func() bool { return !alive(pid) })
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
