package testutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
)

const module = "github.com/virtplane/terraform-provider-virtplane"

// BuildLauncher compiles this tree's virtplane-launcher into out, so that
// tests never run an installed or stale one. It needs cgo and the libvirt
// tag (libvirt's development files, Debian libvirt-dev): without the tag
// the launcher is built without libvirt and fails every launch.
func BuildLauncher(ctx context.Context, out, version string) error {
	return goBuild(ctx, out, module+"/launcher", version, true, "libvirt")
}

// BuildAgent compiles this tree's virtplane-agent (no cgo) into out.
func BuildAgent(ctx context.Context, out, version string) error {
	return goBuild(ctx, out, module+"/agent", version, false, "")
}

// BuildProvider compiles this tree's terraform-provider-virtplane (no
// cgo) into out, for tests that run the real terraform CLI against it.
func BuildProvider(ctx context.Context, out, version string) error {
	return goBuild(ctx, out, module+"/provider", version, false, "")
}

// goBuild builds a main package by its import path, which works from any
// directory of the module (where go test runs).
func goBuild(ctx context.Context, out, pkg, version string, cgo bool, tags string) error {
	ldflags := "-X main.version=" + version + " -X " + module + "/agent/command.Version=" + version
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", tags, "-ldflags", ldflags, "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if cgo {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	}
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build -tags %q %s: %w\n%s", tags, pkg, err, b)
	}
	return nil
}
