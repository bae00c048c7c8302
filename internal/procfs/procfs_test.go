package procfs

import (
	"os"
	"os/exec"
	"slices"
	"syscall"
	"testing"
)

// The stat readers on this process, a stopped child and a pid that is not
// there.
func TestStatReaders(t *testing.T) {
	self := os.Getpid()
	if !Alive(self) || State(self) == 'T' || SessionID(self) < 0 { // session 0 is real: a process whose ancestors never called setsid (CI's runner)
		t.Errorf("self: alive %v, state %c, session %d", Alive(self), State(self), SessionID(self))
	}
	cmd := exec.Command("sleep", "60")
	cmd.Args[0] = cmd.Path // as the node agent starts launchers: by path
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid := cmd.Process.Pid
	if got := SessionID(pid); got != pid {
		t.Errorf("a new session's leader: session %d, want %d", got, pid)
	}
	if got := PidsOf(cmd.Path); !slices.Contains(got, pid) {
		t.Errorf("PidsOf(%s) = %v, want it to hold %d", cmd.Path, got, pid)
	}
	if got := PidsWithArg("eep 6"); slices.Contains(got, pid) {
		t.Errorf("PidsWithArg matched across arguments: %v holds %d", got, pid)
	}
	if got := PidsWithArg("60"); !slices.Contains(got, pid) || slices.Contains(got, self) {
		t.Errorf("PidsWithArg(60) = %v, want it to hold %d and not this process (%d)", got, pid, self)
	}
	if State(-1) != 0 || Alive(0) || SessionID(1<<30) != -1 {
		t.Error("a pid that is not there reads as present")
	}
}
