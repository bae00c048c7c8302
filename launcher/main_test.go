package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// runMainEnv makes the test binary run main (TestMain), so that tests run
// the launcher's commands as the binary would, exit codes included.
const runMainEnv = "VIRTPLANE_LAUNCHER_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runLauncher runs the launcher with args and extra environment, and
// returns its exit code, stdout and stderr.
func runLauncher(t *testing.T, env []string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), runMainEnv+"=1"), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		code = exit.ExitCode()
	default:
		t.Fatalf("running the launcher: %v", err)
	}
	return code, out.String(), errOut.String()
}

func TestUnknownCommand(t *testing.T) {
	code, _, stderr := runLauncher(t, nil, "bogus")
	if code != 2 || !strings.Contains(stderr, `unknown command "bogus"`) {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// The pid dir a node agent hands over must be absolute and clean; the
// default is libvirtd's system one.
func TestServeQEMUPidDir(t *testing.T) {
	f, err := parseServe([]string{"--domain-name", "d"})
	if err != nil || f.pidDir != "/run/libvirt/qemu" {
		t.Fatalf("default: %q, %v", f.pidDir, err)
	}
	if f, err := parseServe([]string{"--domain-name", "d", "--qemu-pid-dir", "/tmp/n1/run/qemu"}); err != nil || f.pidDir != "/tmp/n1/run/qemu" {
		t.Fatalf("absolute: %q, %v", f.pidDir, err)
	}
	for _, bad := range []string{"run/qemu", "/tmp/../run/qemu", "/run/qemu/", ""} {
		if _, err := parseServe([]string{"--domain-name", "d", "--qemu-pid-dir", bad}); err == nil || !strings.Contains(err.Error(), "--qemu-pid-dir") {
			t.Errorf("--qemu-pid-dir %q: %v, want an error naming the flag", bad, err)
		}
	}
}
