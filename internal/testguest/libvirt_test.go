package testguest_test

// Boots the test guest under the real libvirt. These tests run only when
// VIRTPLANE_TEST_LIBVIRT_URI is set (make test sets it); they need
// `make guest` first and VIRTPLANE_TEST_GUEST_DIR pointing at its output.

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"libvirt.org/go/libvirtxml"

	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// Generous: guests boot in ~5 s alone under TCG, several times that when
// the tests' guests share two host cores.
const (
	bootTimeout = 90 * time.Second
	stopTimeout = 60 * time.Second
)

// guestSpec is what a test varies about the domain.
type guestSpec struct {
	cmdline string
	disks   []libvirtxml.DomainDisk
	// nic adds a user-mode (slirp) virtio NIC, as virtplane's domains
	// have; QEMU's netdev behind it is nicNetdev.
	nic bool
	// agent adds the guest agent's virtio-serial channel, as virtplane's
	// domains have.
	agent bool
}

// nicAlias is the alias of the NIC guestSpec.nic adds, and nicNetdev
// the id of the netdev libvirt gives it, for HMP's hostfwd_add.
const (
	nicAlias  = "ua-net-default"
	nicNetdev = "host" + nicAlias
)

// guest is one running transient domain with its serial console file.
type guest struct {
	t         *testing.T
	uri, name string
	console   string
	events    *eventWatcher
	resumed   time.Time
}

func libvirtURI(t *testing.T) string {
	t.Helper()
	uri := os.Getenv(testguest.EnvLibvirtURI)
	if uri == "" {
		t.Skipf("%s is not set; these tests boot the test guest under libvirt", testguest.EnvLibvirtURI)
	}
	if _, err := exec.LookPath("virsh"); err != nil {
		t.Fatalf("virsh not found (Debian package libvirt-clients): %v", err)
	}
	return uri
}

// workDir is a directory QEMU can reach.
func workDir(t *testing.T) string { return testguest.ReachableDir(t, "virtplane-testguest-") }

func virsh(uri string, args ...string) (string, error) {
	cmd := exec.Command("virsh", append([]string{"-c", uri}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("virsh %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// startGuest creates a transient domain, paused, and resumes it once the
// lifecycle watcher has seen it, so no stop event can be missed.
func startGuest(t *testing.T, uri string, spec guestSpec) *guest {
	t.Helper()
	guestDir, err := testguest.Dir()
	if err != nil {
		t.Fatalf("%s is set but the test guest is missing: %v", testguest.EnvLibvirtURI, err)
	}
	dir := workDir(t)
	g := &guest{t: t, uri: uri, name: testguest.DomainName(t, "vp-testguest"), console: filepath.Join(dir, "console.log")}
	dom := testguest.Domain(g.name, guestDir, g.console, spec.cmdline, spec.disks...)
	if spec.nic {
		dom.Devices.Interfaces = []libvirtxml.DomainInterface{{
			Source: &libvirtxml.DomainInterfaceSource{User: &libvirtxml.DomainInterfaceSourceUser{}},
			Model:  &libvirtxml.DomainInterfaceModel{Type: "virtio"},
			Alias:  &libvirtxml.DomainAlias{Name: nicAlias},
		}}
	}
	if spec.agent {
		dom.Devices.Channels = []libvirtxml.DomainChannel{{
			Source: &libvirtxml.DomainChardevSource{UNIX: &libvirtxml.DomainChardevSourceUNIX{Mode: "bind"}},
			Target: &libvirtxml.DomainChannelTarget{VirtIO: &libvirtxml.DomainChannelTargetVirtIO{Name: "org.qemu.guest_agent.0"}},
		}}
	}
	xml, err := dom.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	xmlPath := filepath.Join(dir, "domain.xml")
	if err := os.WriteFile(xmlPath, []byte(xml), 0o644); err != nil {
		t.Fatal(err)
	}
	g.events = watchEvents(t, uri)
	if _, err := virsh(uri, "create", "--paused", xmlPath); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Transient: destroying also removes it. It is usually gone already.
		if out, err := virsh(uri, "destroy", g.name); err != nil && !strings.Contains(out, "ailed to get domain") && !strings.Contains(out, "not running") {
			t.Logf("cleanup: %v", err)
		}
	})
	testutil.EventuallyNoError(t, 30*time.Second, "the lifecycle watcher to see "+g.name+" start", func() error {
		if _, ok := g.events.find(g.name, "Started", "Suspended"); ok {
			return nil
		}
		return fmt.Errorf("events: %v", g.events.all())
	})
	if _, err := virsh(uri, "resume", g.name); err != nil {
		t.Fatal(err)
	}
	g.resumed = time.Now()
	return g
}

func (g *guest) consoleText() string {
	b, _ := os.ReadFile(g.console) // absent until QEMU writes
	return string(b)
}

// waitMarker waits for marker on the console and returns what follows it.
func (g *guest) waitMarker(marker string, timeout time.Duration) string {
	g.t.Helper()
	var rest string
	testutil.EventuallyNoError(g.t, timeout, marker+" on "+g.name+"'s console", func() error {
		console := g.consoleText()
		var ok bool
		if rest, ok = testguest.FindMarker(console, marker); ok {
			return nil
		}
		return fmt.Errorf("events %v; console:\n%s", g.events.forDomain(g.name), console)
	})
	return rest
}

// waitBooted waits for the boot marker and logs how long the boot took.
func (g *guest) waitBooted() map[string]string {
	g.t.Helper()
	f := testguest.Fields(g.waitMarker(testguest.MarkerBooted, bootTimeout))
	g.t.Logf("%s booted: marker %.1fs after resume, guest uptime %ss", g.name, time.Since(g.resumed).Seconds(), f["uptime"])
	return f
}

// waitStopped waits for the domain to shut off and returns the reason as
// libvirt's lifecycle event gives it (lower case: "shutdown", "crashed",
// "destroyed"...). Every guest here is transient (startGuest), gone once
// shut off, so virsh domstate --reason cannot tell; the event carries the
// same reason, and the watcher runs from before the guest started.
func (g *guest) waitStopped(timeout time.Duration) string {
	g.t.Helper()
	var reason string
	testutil.EventuallyNoError(g.t, timeout, g.name+" to shut off", func() error {
		if ev, ok := g.events.find(g.name, "Stopped"); ok {
			reason = strings.ToLower(ev.detail)
			return nil
		}
		return fmt.Errorf("events %v; console:\n%s", g.events.forDomain(g.name), g.consoleText())
	})
	return reason
}

// domstate returns `virsh domstate --reason`, e.g. "running (unpaused)".
func (g *guest) domstate() string {
	out, err := virsh(g.uri, "domstate", "--reason", g.name)
	if err != nil {
		return err.Error()
	}
	return strings.TrimSpace(out)
}

type lifecycleEvent struct {
	domain, event, detail string
}

// eventWatcher runs `virsh event --loop` for lifecycle events of all
// domains: the domain does not exist yet when it starts.
type eventWatcher struct {
	mu     sync.Mutex
	events []lifecycleEvent
}

var eventLine = regexp.MustCompile(`^event 'lifecycle' for domain '([^']+)': (\S+) (.*)$`)

func watchEvents(t *testing.T, uri string) *eventWatcher {
	t.Helper()
	w := &eventWatcher{}
	cmd := exec.Command("virsh", "-c", uri, "event", "--event", "lifecycle", "--loop")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("virsh event: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			m := eventLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
			if m == nil {
				continue
			}
			w.mu.Lock()
			w.events = append(w.events, lifecycleEvent{domain: m[1], event: m[2], detail: m[3]})
			w.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		cmd.Wait()
	})
	return w
}

func (w *eventWatcher) find(domain string, kinds ...string) (lifecycleEvent, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.events {
		for _, k := range kinds {
			if e.domain == domain && e.event == k {
				return e, true
			}
		}
	}
	return lifecycleEvent{}, false
}

func (w *eventWatcher) all() []lifecycleEvent {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]lifecycleEvent(nil), w.events...)
}

func (w *eventWatcher) forDomain(domain string) []string {
	var out []string
	for _, e := range w.all() {
		if e.domain == domain {
			out = append(out, e.event+" "+e.detail)
		}
	}
	return out
}
