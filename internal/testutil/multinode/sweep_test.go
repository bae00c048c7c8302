package multinode

import (
	"os"
	"path/filepath"
	"testing"
)

// TestSweepDirsRemovesOnlyDeadRuns: a run dir whose owner process is gone
// is removed; a live owner's, a run being made (no owner yet, new), and
// whatever merely shares the prefix are kept.
func TestSweepDirsRemovesOnlyDeadRuns(t *testing.T) {
	base := t.TempDir()
	mk := func(name string) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	live := mk(runDirPrefix + "0a0b0c")
	if err := writeOwner(live); err != nil {
		t.Fatal(err)
	}
	dead := mk(runDirPrefix + "0d0e0f")
	// pid 1 runs, but did not start at that tick: a reused pid is no owner.
	if err := os.WriteFile(filepath.Join(dead, ownerFile), []byte("1 999999999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	starting := mk(runDirPrefix + "101112")
	notRun := mk(runDirPrefix + "logs")
	file := filepath.Join(base, runDirPrefix+"131415")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	ids, err := sweepDirs(t, base)
	if err != nil {
		t.Fatal(err)
	}
	if !ids["0a0b0c"] || !ids["101112"] || len(ids) != 2 {
		t.Errorf("live runs %v, want 0a0b0c and 101112", ids)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the dead run's dir is still there (%v)", err)
	}
	for _, p := range []string{live, starting, notRun, file} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s was removed: %v", p, err)
		}
	}
}
