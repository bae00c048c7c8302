package driver

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
)

// fakeQEMU starts a process whose command line names a domain as
// libvirt's QEMU does, with its pid in dir/<domain>.pid.
func fakeQEMU(t *testing.T, dir, domain string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 300", "guest="+domain+",debug-threads=on")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if err := os.WriteFile(filepath.Join(dir, domain+".pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// TestKillQEMUWithoutLibvirt: a self-fence that libvirt does not answer
// kills the domain's QEMU itself, only for a domain last seen as
// RestartElsewhere, and never a process that is not the domain's QEMU.
func TestKillQEMUWithoutLibvirt(t *testing.T) {
	h := newHarness(t)
	q := fakeQEMU(t, h.pids, testDomain)
	exited := make(chan error, 1)
	go func() { exited <- q.Wait() }()

	if gone, err := h.d.killQEMU(); gone || err == nil {
		t.Fatalf("policy unknown: killQEMU = %v, %v; want a refusal", gone, err)
	}
	h.d.policy.remember(domxml.Metadata{NodeFailurePolicy: apiv1.NodeFailurePolicyWait})
	if gone, err := h.d.killQEMU(); gone || err == nil {
		t.Fatalf("Wait domain: killQEMU = %v, %v; want a refusal", gone, err)
	}
	select {
	case err := <-exited:
		t.Fatalf("the QEMU of a Wait domain died: %v", err)
	default:
	}

	// The pid file names another process: left alone, and nothing of the
	// domain's runs.
	other := fakeQEMU(t, t.TempDir(), "someone-else")
	if err := os.WriteFile(filepath.Join(h.pids, testDomain+".pid"), []byte(strconv.Itoa(other.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	h.d.policy.remember(domxml.Metadata{NodeFailurePolicy: apiv1.NodeFailurePolicyRestartElsewhere})
	if gone, err := h.d.killQEMU(); !gone || err != nil {
		t.Fatalf("stale pid file: killQEMU = %v, %v", gone, err)
	}
	if err := syscall.Kill(other.Process.Pid, 0); err != nil {
		t.Fatalf("another domain's process is gone: %v", err)
	}

	if err := os.WriteFile(filepath.Join(h.pids, testDomain+".pid"), []byte(strconv.Itoa(q.Process.Pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	if gone, err := h.d.killQEMU(); !gone || err != nil {
		t.Fatalf("RestartElsewhere domain: killQEMU = %v, %v", gone, err)
	}
	if err := <-exited; err == nil {
		t.Fatal("the QEMU exited cleanly; want killed")
	}
}
