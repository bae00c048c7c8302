package console

import (
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/console/consoletest"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// Uids as the store makes them: the layout takes nothing else.
const (
	vm1 = "7a0d1c52-0000-4000-8000-0000000000a1"
	vm2 = "7a0d1c52-0000-4000-8000-0000000000a2"
	u1  = "7a0d1c52-0000-4000-8000-000000000001"
	u2  = "7a0d1c52-0000-4000-8000-000000000002"
	u3  = "7a0d1c52-0000-4000-8000-000000000003"
	uB  = "7a0d1c52-0000-4000-8000-00000000000b"
	uN  = "7a0d1c52-0000-4000-8000-00000000000e"
)

// must returns the results of layout calls, failing t on an error.
func must(t *testing.T) func(string, error) string {
	return func(p string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// An ended instance's log, rotated files included, moves under its VM;
// only the two newest instances' logs stay.
func TestKeepConsoleLogKeepsTwoNewest(t *testing.T) {
	must := must(t)
	a := New(Options{Layout: nodedir.Layout{Root: t.TempDir()}})
	base := must(a.opts.Layout.KeptLogsDir(vm1))
	past := time.Now().Add(-time.Hour)
	for i, uid := range []string{u1, u2, u3} {
		rec := &state.VMI{UID: uid, Namespace: "ns", Name: "web", VMUID: vm1, Dir: must(a.opts.Layout.VMIDir(uid))}
		if err := os.MkdirAll(rec.Dir, 0o700); err != nil {
			t.Fatal(err)
		}
		path := nodedir.ConsoleLogPath(rec.Dir)
		consoletest.WriteLog(t, path+".0", uid+" older\n")
		consoletest.WriteLog(t, path, uid+" newer\n")
		if err := a.Keep(rec); err != nil {
			t.Fatal(err)
		}
		if left, _ := logFiles(path); len(left) != 0 {
			t.Fatalf("%s: files left behind: %v", uid, left)
		}
		// Each kept log older than the next, whatever the file system's
		// timestamp resolution.
		at := past.Add(time.Duration(i) * time.Minute)
		if err := os.Chtimes(filepath.Join(base, uid), at, at); err != nil {
			t.Fatal(err)
		}
	}
	ents, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	sort.Strings(got)
	if want := []string{u2, u3}; !reflect.DeepEqual(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}

	// Named, so that the VM's directory goes with the VM.
	if b, err := os.ReadFile(filepath.Join(must(a.opts.Layout.VMDir(vm1)), nodedir.VMMetaFile)); err != nil || !strings.Contains(string(b), `"uid":"`+vm1+`"`) {
		t.Fatalf("%s: %s, %v", nodedir.VMMetaFile, b, err)
	}

	// The newest by default, a named one when asked; rotated files too.
	p, err := a.keptLogPath(vm1, "")
	if err != nil || p != nodedir.ConsoleLogPath(filepath.Join(base, u3)) {
		t.Fatalf("keptLogPath = %q, %v", p, err)
	}
	p, err = a.keptLogPath(vm1, u2)
	if err != nil || p != nodedir.ConsoleLogPath(filepath.Join(base, u2)) {
		t.Fatalf("keptLogPath(u2) = %q, %v", p, err)
	}
	var s logSink
	fl, err := sendKept(p, 0, s.send)
	if err != nil {
		t.Fatal(err)
	}
	fl.Close()
	if s.String() != u2+" older\n"+u2+" newer\n" {
		t.Fatalf("kept log of u2 = %q", s.String())
	}
	if p, err := a.keptLogPath(vm1, u1); err != nil || p != nodedir.ConsoleLogPath(filepath.Join(base, u3)) {
		t.Fatalf("keptLogPath(pruned u1) = %q, %v; want the newest", p, err)
	}
	if p, err := a.keptLogPath(vm2, ""); err != nil || p != "" {
		t.Fatalf("keptLogPath of a VM without logs = %q, %v", p, err)
	}
}

// A bare VMI keeps nothing, and a VMI without a log is no error.
func TestKeepConsoleLogNothingToKeep(t *testing.T) {
	must := must(t)
	a := New(Options{Layout: nodedir.Layout{Root: t.TempDir()}})
	bare := &state.VMI{UID: uB, Dir: must(a.opts.Layout.VMIDir(uB))}
	if err := os.MkdirAll(bare.Dir, 0o700); err != nil {
		t.Fatal(err)
	}
	consoletest.WriteLog(t, nodedir.ConsoleLogPath(bare.Dir), "x")
	if err := a.Keep(bare); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a.opts.Layout.VMsDir()); !os.IsNotExist(err) {
		t.Fatalf("a bare VMI's log was kept: %v", err)
	}
	if err := a.Keep(&state.VMI{UID: uN, VMUID: vm1, Dir: must(a.opts.Layout.VMIDir(uN))}); err != nil {
		t.Fatal(err)
	}
}

// The uids of a console session come from the API: one that is a path is
// an error, and no file outside the VM's directory is read for it.
func TestKeptLogPathRefusesPaths(t *testing.T) {
	root := t.TempDir()
	a := New(Options{Layout: nodedir.Layout{Root: root}})
	secret := filepath.Join(root, "secret")
	if err := os.MkdirAll(secret, 0o700); err != nil {
		t.Fatal(err)
	}
	consoletest.WriteLog(t, nodedir.ConsoleLogPath(secret), "secret\n")
	for _, c := range []struct{ vm, vmi string }{
		{vm1, "../../../secret"}, // <root>/vms/<vm>/console/../../../secret
		{"..", "../secret"},      // <root>/vms/../console/../secret
		{"../secret/..", ""},
	} {
		if p, err := a.keptLogPath(c.vm, c.vmi); err == nil || p != "" {
			t.Errorf("keptLogPath(%q, %q) = %q, %v; want an error", c.vm, c.vmi, p, err)
		}
	}
}

// A record whose directory is not its VMI's own (an older agent's, for a
// uid that was a path) keeps nothing and moves no file.
func TestKeepRefusesAForeignRecordDir(t *testing.T) {
	root := t.TempDir()
	a := New(Options{Layout: nodedir.Layout{Root: root}})
	outside := t.TempDir()
	consoletest.WriteLog(t, nodedir.ConsoleLogPath(outside), "not ours\n")
	rec := &state.VMI{UID: u1, Namespace: "ns", Name: "web", VMUID: vm1, Dir: outside}
	if err := a.Keep(rec); err == nil {
		t.Fatal("kept the log of a record whose directory is outside the layout")
	}
	if _, err := os.Stat(nodedir.ConsoleLogPath(outside)); err != nil {
		t.Fatalf("the file outside was moved: %v", err)
	}
	if _, err := os.Stat(a.opts.Layout.VMsDir()); !os.IsNotExist(err) {
		t.Fatalf("a VM directory was made: %v", err)
	}
}
