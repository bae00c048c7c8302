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
