package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// Environment the tests need; without it they skip.
const (
	envLibvirtURI = "VIRTPLANE_TEST_LIBVIRT_URI"
	envReport     = "VIRTPLANE_E2E_REPORT"
)

// env is what TestMain prepared once for the package.
var env struct {
	uri      string
	agent    string // virtplane-agent binary (CGO_ENABLED=0)
	launcher string // virtplane-launcher binary (cgo)
	imageDir string // holds the guest kernel and initrd
	kernel   string // file name of the kernel in imageDir
	skip     string // why the tests skip, when they do
	setupErr error
}

func TestMain(m *testing.M) {
	dir, err := setup()
	code := sharedCeph.CloseAfter(m.Run())
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
	if err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		code = 1
	}
	os.Exit(code)
}

// setup builds the binaries and lays out the image directory, once for
// the package; it returns the directory to remove at the end.
func setup() (string, error) {
	env.uri = os.Getenv(envLibvirtURI)
	if env.uri == "" {
		env.skip = envLibvirtURI + " is not set; the end-to-end tests boot VMs under libvirt"
		return "", nil
	}
	if os.Getenv(testguest.EnvDir) == "" {
		env.skip = testguest.EnvDir + " is not set; run `make guest` and point it at bin/guest"
		return "", nil
	}
	guestDir, err := testguest.Dir()
	if err != nil {
		env.setupErr = err
		return "", err
	}
	if _, err := exec.LookPath("virsh"); err != nil {
		env.setupErr = fmt.Errorf("virsh not found (Debian package libvirt-clients): %w", err)
		return "", env.setupErr
	}
	// QEMU runs as another user under qemu:///system and must traverse
	// to the kernel: os.MkdirTemp's 0700 is opened up, unlike
	// t.TempDir's parents.
	dir, err := os.MkdirTemp("", "virtplane-e2e-")
	if err != nil {
		env.setupErr = err
		return "", err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		env.setupErr = err
		return dir, err
	}
	env.imageDir = filepath.Join(dir, "images")
	if err := os.Mkdir(env.imageDir, 0o755); err != nil {
		env.setupErr = err
		return dir, err
	}
	if env.kernel, err = testguest.Install(guestDir, env.imageDir); err != nil {
		env.setupErr = err
		return dir, err
	}

	env.agent = filepath.Join(dir, "bin", "virtplane-agent")
	env.launcher = filepath.Join(dir, "bin", "virtplane-launcher")
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, build := range []func() error{
		func() error { return testutil.BuildAgent(context.Background(), env.agent, "e2e") },
		func() error { return testutil.BuildLauncher(context.Background(), env.launcher, "e2e") },
	} {
		wg.Go(func() { errs[i] = build() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		env.setupErr = err
		return dir, err
	}
	return dir, nil
}

// requireEnv skips the test without libvirt or the guest, and fails it
// when the package could not be set up.
func requireEnv(t *testing.T) {
	t.Helper()
	if env.skip != "" {
		t.Skip(env.skip)
	}
	if env.setupErr != nil {
		t.Fatalf("setup: %v", env.setupErr)
	}
}
