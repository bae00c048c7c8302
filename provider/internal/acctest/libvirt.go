package acctest

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// libvirtHost is the host side of the real node: the files the harness
// prepared for it, and what the tests read back from libvirt and the
// guests' consoles.
type libvirtHost struct {
	uri      string
	launcher string // virtplane-launcher built from this tree for the run
	imageDir string // holds the test guest's kernel and initrd
	nodeDir  string // the node agent's data dir (VMI dirs, consoles)
	kernel   string // file name of the kernel in imageDir
	node     string // node name, recorded in every domain it defines
	adoptDir string // the node agent's --adopt-dir (adopt.go)
}

// prepareLibvirtHost lays out dir for a real node: the launcher binary
// and an image directory with the test guest.
func prepareLibvirtHost(ctx context.Context, dir, uri string) (*libvirtHost, error) {
	if _, err := exec.LookPath("virsh"); err != nil {
		return nil, fmt.Errorf("virsh not found (Debian package libvirt-clients): the tests read domains back from libvirt with it: %w", err)
	}
	guestDir, err := testguest.Dir()
	if err != nil {
		return nil, err
	}
	// QEMU runs as another user under qemu:///system and must reach the
	// kernel through dir, which os.MkdirTemp made 0700. Search only: the
	// agent's data under it keeps its own 0700.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err
	}
	h := &libvirtHost{
		uri:      uri,
		launcher: filepath.Join(dir, "bin", "virtplane-launcher"),
		imageDir: filepath.Join(dir, "images"),
		nodeDir:  filepath.Join(dir, "node"),
		adoptDir: filepath.Join(dir, "adopt"),
	}
	for _, d := range []string{h.imageDir, h.adoptDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
	}
	if h.kernel, err = testguest.Install(guestDir, h.imageDir); err != nil {
		return nil, err
	}
	if err := testutil.BuildLauncher(ctx, h.launcher, "acctest"); err != nil {
		return nil, err
	}
	return h, nil
}

// virsh runs virsh on the node's libvirt with an argument list.
func (h *libvirtHost) virsh(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "virsh", append([]string{"-c", h.uri}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("virsh %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.String(), nil
}

// domains lists every libvirt domain, running or not, whose name starts
// with prefix. It asks virsh rather than the launcher: a domain the
// launcher does not recognise as virtplane's counts too.
func (h *libvirtHost) domains(ctx context.Context, prefix string) ([]string, error) {
	out, err := h.virsh(ctx, "list", "--all", "--name")
	if err != nil {
		return nil, err
	}
	var ds []string
	for _, n := range strings.Fields(out) {
		if strings.HasPrefix(n, prefix) {
			ds = append(ds, n)
		}
	}
	return ds, nil
}

// domainMemory reads a domain's <memory> from its live XML, in bytes.
func (h *libvirtHost) domainMemory(ctx context.Context, domain string) (int64, error) {
	out, err := h.virsh(ctx, "dumpxml", domain)
	if err != nil {
		return 0, err
	}
	var d struct {
		Memory struct {
			Unit  string `xml:"unit,attr"`
			Value int64  `xml:",chardata"`
		} `xml:"memory"`
	}
	if err := xml.Unmarshal([]byte(out), &d); err != nil {
		return 0, fmt.Errorf("domain %s XML: %w", domain, err)
	}
	unit := map[string]int64{"": 1 << 10, "KiB": 1 << 10, "k": 1 << 10, "MiB": 1 << 20, "M": 1 << 20, "GiB": 1 << 30, "G": 1 << 30, "b": 1, "bytes": 1}
	mul, ok := unit[d.Memory.Unit]
	if !ok {
		return 0, fmt.Errorf("domain %s: memory unit %q", domain, d.Memory.Unit)
	}
	return d.Memory.Value * mul, nil
}

// waitMarker waits until the serial console of VMI uid, which virtlogd
// writes into the VMI's directory, shows marker, and returns its fields.
func (h *libvirtHost) waitMarker(tb testing.TB, uid, marker string) map[string]string {
	tb.Helper()
	dir, err := nodedir.Layout{Root: h.nodeDir}.VMIDir(uid)
	if err != nil {
		tb.Fatal(err)
	}
	path := nodedir.ConsoleLogPath(dir)
	var fields map[string]string
	testutil.EventuallyNoError(tb, GuestBootTimeout, fmt.Sprintf("%s on the console of VMI %s", marker, uid), func() error {
		// The whole file each time: it is a few kB.
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rest, ok := testguest.FindMarker(string(b), marker) // complete lines only
		if !ok {
			return fmt.Errorf("not in %s yet; console:\n%s", path, b)
		}
		fields = testguest.Fields(rest)
		return nil
	})
	return fields
}

// ours lists the domains this run's node defined: libvirt domains whose
// virtplane metadata names our node, which no other run (nor the e2e
// tests sharing the host) uses.
func (h *libvirtHost) ours(ctx context.Context) ([]launcher.DomainInfo, error) {
	all, err := launcher.ListDomains(ctx, h.launcher, h.uri)
	if err != nil {
		return nil, err
	}
	var out []launcher.DomainInfo
	for _, d := range all {
		if d.Node == h.node {
			out = append(out, d)
		}
	}
	return out, nil
}

// drain gives the node agent, while it still runs, a moment to undefine
// domains of VMs destroyed just before the end. It runs after the tests,
// with no test to fail: what is left is cleanup's to report.
func (h *libvirtHost) drain() {
	// Each check runs the launcher's list-domains: every 200 ms.
	_ = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, drainTimeout, true, func(ctx context.Context) (bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		ds, err := h.ours(ctx)
		return err != nil || len(ds) == 0, nil
	})
}

// drainTimeout bounds drain: a guest that obeys the power button is gone
// in seconds.
const drainTimeout = 30 * time.Second

// errLeftovers marks what a run left on the host.
var errLeftovers = errors.New("left behind on the host")

// cleanup runs after the agent stopped. The node agent leaves launchers
// and their guests running when it stops (they outlive agent restarts),
// so whatever a failed test left is ended here: our launchers by pid,
// then our domains. It reports what it found, which after a passing run
// must be nothing.
func (h *libvirtHost) cleanup() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var found []string
	for _, pid := range h.launcherPids() {
		found = append(found, fmt.Sprintf("launcher pid %d", pid))
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	ds, err := h.ours(ctx)
	if err != nil {
		return fmt.Errorf("listing the run's domains: %w", err)
	}
	var errs []error
	for _, d := range ds {
		found = append(found, "domain "+d.Name+" ("+d.State+")")
		if d.State != "shutoff" {
			if _, err := h.virsh(ctx, "destroy", d.Name); err != nil {
				errs = append(errs, err)
			}
		}
		if _, err := h.virsh(ctx, "undefine", d.Name, "--nvram"); err != nil {
			errs = append(errs, err)
		}
	}
	if len(found) > 0 {
		errs = append(errs, fmt.Errorf("%w (now removed): %s", errLeftovers, strings.Join(found, ", ")))
	}
	return errors.Join(errs...)
}

// launcherPids finds the live processes of this run's launcher binary,
// whose path (in the run's temporary directory) is theirs alone.
func (h *libvirtHost) launcherPids() []int { return procfs.PidsOf(h.launcher) }
