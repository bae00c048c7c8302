package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	nodeconsole "github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/console"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// markerEcho is how the test guest answers a line typed on its serial
// port (internal/testguest/init.sh).
const markerEcho = "VIRTPLANE-ECHO"

// TestConsole: `virtplane-agent console` streams a booted guest's serial
// console through the API (the boot line, whenever it was printed, with
// --log); with --interactive a typed line reaches the guest, whose answer
// comes back; a follower ends with the instance; after the VM stopped,
// --log reads the kept log of the ended instance.
func TestConsole(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.create(c.guestVM("con", apiv1.RunStrategyAlways, testguest.Cmdline(testguest.Hostname("vp-e2e-con"))))
	vmi := c.waitRunning("con", "")
	uid := vmi.GetMetadata().GetUid()

	follower := c.cli("console", "con", "--log")
	booted := testguest.Fields(follower.waitMarker(testguest.MarkerBooted, bootTimeout))
	if booted["hostname"] != "vp-e2e-con" {
		t.Errorf("boot line through the API: hostname %q", booted["hostname"])
	}

	inter := c.cli("console", "con", "--interactive")
	line := "hello-" + randomID(t)
	start := time.Now()
	// Typed into the guest, answered on its console: tty echo, then the
	// init's answer.
	inter.typeIn(line + "\n")
	inter.waitMarker(markerEcho+" "+line, stateTimeout)
	report(t, "console: a line typed through the API answered by the guest in %s", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(inter.errText(), "Ctrl-]") {
		t.Errorf("no escape hint on stderr: %q", inter.errText())
	}
	inter.typeIn("\x1d") // Ctrl-]
	if err := inter.wait(stateTimeout); err != nil {
		t.Fatalf("console -i after Ctrl-]: %v; stderr %q", err, inter.errText())
	}
	// The follower saw the exchange too.
	follower.waitMarker(markerEcho+" "+line, stateTimeout)

	if _, err := c.api.VMs.Stop(c.ctx, &apiv1.StopVirtualMachineRequest{Key: c.key("con")}); err != nil {
		t.Fatal(err)
	}
	follower.waitMarker(testguest.MarkerPoweroff, stateTimeout)
	if err := follower.wait(stateTimeout); err != nil {
		t.Fatalf("follower after the instance ended: %v; stderr %q", err, follower.errText())
	}
	if !strings.Contains(follower.errText(), "["+nodeconsole.NoticeInstanceEnded+"]") {
		t.Errorf("follower's stderr %q: no %q notice", follower.errText(), nodeconsole.NoticeInstanceEnded)
	}
	c.waitPrintable("con", apiv1.PrintableStopped, stateTimeout)
	testutil.Eventually(c.t, stateTimeout, "the VMI gone", func() bool { return c.vmi("con") == nil })
	keptDir, err := nodedir.Layout{Root: c.nodeDir}.KeptLogDir(c.vm("con").GetMetadata().GetUid(), uid)
	c.must(err)
	kept := nodedir.ConsoleLogPath(keptDir)
	if _, err := os.Stat(kept); err != nil {
		t.Errorf("kept console log: %v", err)
	}

	// The ended instance's log, from the node the VM last ran on.
	out, stderr, err := c.cliRun("console", "con", "--log", "--no-follow")
	if err != nil {
		t.Fatalf("console --log of a stopped VM: %v; stderr %q", err, stderr)
	}
	for _, m := range []string{testguest.MarkerBooted, markerEcho + " " + line, testguest.MarkerPoweroff} {
		if _, ok := testguest.FindMarker(out, m); !ok {
			t.Errorf("console --log of the ended instance lacks %s:\n%s", m, out)
		}
	}
	tail, _, err := c.cliRun("console", "con", "--log", "--no-follow", "--tail", "100")
	if err != nil || len(tail) != 100 || !strings.HasSuffix(out, tail) {
		t.Errorf("--tail 100: %q, %v; want the last 100 bytes of the log", tail, err)
	}
	if _, stderr, err := c.cliRun("console", "con"); err != nil || !strings.Contains(stderr, "not running") {
		t.Errorf("console of a stopped VM: %v; stderr %q", err, stderr)
	}
	if _, stderr, err := c.cliRun("console", "con", "-i"); err == nil || !strings.Contains(stderr, "interactive console needs") {
		t.Errorf("console -i of a stopped VM: %v; stderr %q", err, stderr)
	}
}

// cliConsole is a running `virtplane-agent console` process.
type cliConsole struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	mu     sync.Mutex
	out    bytes.Buffer
	errOut bytes.Buffer
	done   chan error
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// cliArgs are args for the agent binary against this cluster's API.
func (c *cluster) cliArgs(args ...string) []string {
	return append([]string{"--endpoint", "unix://" + c.socket, "-n", c.ns}, args...)
}

// cli starts the agent binary with args against this cluster's API.
func (c *cluster) cli(args ...string) *cliConsole {
	c.t.Helper()
	return startCLI(c.ctx, c.t, c.cliArgs(args...))
}

// startCLI starts the agent binary with args; the test's end stops it.
func startCLI(ctx context.Context, t *testing.T, args []string) *cliConsole {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	cmd := exec.CommandContext(ctx, env.agent, args...)
	p := &cliConsole{t: t, cmd: cmd, done: make(chan error, 1)}
	cmd.Stdout = lockedWriter{&p.mu, &p.out}
	cmd.Stderr = lockedWriter{&p.mu, &p.errOut}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin = stdin
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		_ = stdin.Close()
	})
	return p
}

// cliRun runs the agent binary with args to its end.
func (c *cluster) cliRun(args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(c.ctx, stateTimeout)
	defer cancel()
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, env.agent, c.cliArgs(args...)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

func (p *cliConsole) text() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *cliConsole) errText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.errOut.String()
}

func (p *cliConsole) typeIn(s string) {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, s); err != nil {
		p.t.Fatalf("typing into the console: %v", err)
	}
}

// waitMarker waits until stdout shows marker and returns what follows it.
func (p *cliConsole) waitMarker(marker string, d time.Duration) string {
	p.t.Helper()
	var rest string
	testutil.EventuallyNoError(p.t, d, marker+" on the console", func() error {
		var ok bool
		if rest, ok = testguest.FindMarker(p.text(), marker); ok {
			return nil
		}
		select {
		case err := <-p.done:
			p.done <- err
			if rest, ok = testguest.FindMarker(p.text(), marker); ok {
				return nil
			}
			p.t.Fatalf("console ended (%v) without %s; stdout:\n%s\nstderr:\n%s", err, marker, p.text(), p.errText())
		default:
		}
		return fmt.Errorf("stdout:\n%s\nstderr:\n%s", p.text(), p.errText())
	})
	return rest
}

// wait waits until the process exits and returns how it did.
func (p *cliConsole) wait(d time.Duration) error {
	p.t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(d):
		p.t.Fatalf("console did not end within %v; stdout:\n%s\nstderr:\n%s", d, p.text(), p.errText())
		return nil
	}
}
