package procfs

import (
	"os"
	"runtime"
	"strings"
	"testing"
)

// Read against this test's own process: a Go binary always has anonymous
// mappings and its executable mapped.
func TestSmapsReaders(t *testing.T) {
	pid := os.Getpid()
	maps, err := RssByMapping(pid)
	if err != nil || len(maps) == 0 {
		t.Fatalf("RssByMapping = %v, %v", maps, err)
	}
	exe, _ := os.Executable()
	var sawExe bool
	for i, m := range maps {
		if i > 0 && m.RssKiB > maps[i-1].RssKiB {
			t.Fatalf("not largest first: %v", maps)
		}
		sawExe = sawExe || strings.HasSuffix(exe, m.Name)
	}
	if !sawExe {
		t.Errorf("executable %s not among the mappings %v", exe, maps)
	}

	size, rss, err := GuestRAM(pid, 1)
	if err != nil || size < 1 || rss > size {
		t.Fatalf("GuestRAM(1 kB) = %d, %d, %v", size, rss, err)
	}
	if _, _, err := GuestRAM(pid, 1<<40); err == nil || !strings.Contains(err.Error(), "no anonymous mapping") {
		t.Fatalf("GuestRAM(1 PB) = %v", err)
	}
	if _, err := RssByMapping(-1); err == nil {
		t.Fatal("RssByMapping of no process succeeded")
	}
}

// TestPrivate: a process's private memory grows by what it writes to a
// fresh anonymous buffer, is at most its Pss, and a missing process is an
// error.
func TestPrivate(t *testing.T) {
	pid := os.Getpid()
	before, err := Private(pid)
	if err != nil || before <= 0 {
		t.Fatalf("Private = %d, %v", before, err)
	}
	buf := make([]byte, 16<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	after, err := Private(pid)
	if err != nil {
		t.Fatal(err)
	}
	if after-before < 15<<10 {
		t.Errorf("Private grew by %d kB after touching 16 MiB", after-before)
	}
	pss, err := Pss(pid)
	if err != nil || pss < after-(1<<10) {
		t.Errorf("Pss %d kB (%v) below private %d kB", pss, err, after)
	}
	runtime.KeepAlive(buf)
	if _, err := Private(-1); err == nil {
		t.Error("Private of no process succeeded")
	}
}
