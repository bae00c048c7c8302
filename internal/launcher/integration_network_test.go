package launcher

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// The network of a real launcher's domain under the real libvirtd: the
// test guest on user-mode networking with a port forward to its HTTP
// responder on 127.0.0.1, and its guest agent stand-in telling the
// launcher its address. Traffic stays on this host's loopback.

// guestBootTimeout bounds a guest's boot to its markers under TCG, with
// other tests' guests on the same two cores.
const guestBootTimeout = 2 * time.Minute

// guestEnv is the test guest installed where QEMU can read it.
type guestEnv struct {
	dir, kernel string
}

func installGuest(t *testing.T) guestEnv {
	t.Helper()
	src, err := testguest.Dir()
	if err != nil {
		t.Skipf("the test guest: %v", err)
	}
	dir := testguest.ReachableDir(t, "vp-launcher-net-")
	kernel, err := testguest.Install(src, dir)
	if err != nil {
		t.Fatal(err)
	}
	return guestEnv{dir: dir, kernel: filepath.Join(dir, kernel)}
}

// netVMI is e's VMI with one user interface whose forwards are fwds.
func (e *env) netVMI(phase string, fwds ...*apiv1.PortForward) *apiv1.VirtualMachineInstance {
	v := e.vmi(phase)
	v.Spec.Domain.Memory.Guest = "160Mi"
	v.Spec.Networks = []*apiv1.Network{{Name: "default", User: &apiv1.UserNetwork{PortForwards: fwds}}}
	v.Spec.Domain.Devices = &apiv1.Devices{Interfaces: []*apiv1.Interface{{Name: "default", MacAddress: "02:00:00:12:34:56"}}}
	return v
}

// guestOpts boots the test guest with cmdline.
func (e *env) guestOpts(g guestEnv, cmdline string) *launcherpb.SyncOptions {
	o := e.syncOpts()
	o.KernelPath = g.kernel
	o.InitrdPath = testguest.Initrd(g.dir)
	o.KernelCmdline = cmdline
	return o
}

func (e *env) waitConsole(marker string) map[string]string {
	e.t.Helper()
	var rest string
	testutil.EventuallyNoError(e.t, guestBootTimeout, marker+" on the console", func() error {
		b, _ := os.ReadFile(filepath.Join(e.dir, "console.log"))
		var ok bool
		if rest, ok = testguest.FindMarker(string(b), marker); ok {
			return nil
		}
		return fmt.Errorf("console so far:\n%s", b)
	})
	return testguest.Fields(rest)
}

func httpGet(url string) (string, error) {
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// waitAgentAddress waits until c reports the guest agent's 10.0.2.15
// for the interface, and returns that status.
func waitAgentAddress(t *testing.T, ctx context.Context, c Client) *launcherpb.DomainStatus {
	t.Helper()
	var st *launcherpb.DomainStatus
	testutil.EventuallyNoError(t, guestBootTimeout, "the guest agent's address in the launcher's status", func() error {
		var err error
		if st, err = c.GetDomain(ctx); err != nil {
			return err
		}
		ifs := st.GetInterfaces()
		if len(ifs) != 1 || ifs[0].GetIpAddress() != "10.0.2.15" || ifs[0].GetSource() != apiv1.InterfaceSourceAgent || !st.GetGuestAgentConnected() {
			return fmt.Errorf("status %v", st)
		}
		return nil
	})
	return st
}

// TestUserNetworkPortForwardAndAgent boots the test guest with its HTTP
// responder and guest agent stand-in; the launcher adds the port forward
// 127.0.0.1:<free port> → guest 8080 and reports the agent's address.
// A launcher that replaces it (after a crash) adopts the running domain
// without failing on the forward that is already there; a forward whose
// host port is taken is refused with an error naming it, and the guest
// keeps running.
func TestUserNetworkPortForwardAndAgent(t *testing.T) {
	e := newEnv(t)
	g := installGuest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	port, udpPort := testutil.FreePort(t, "tcp"), testutil.FreePort(t, "udp")
	fwd := &apiv1.PortForward{HostPort: int32(port), GuestPort: 8080}
	udp := &apiv1.PortForward{HostPort: int32(udpPort), GuestPort: 53, Protocol: "udp"}
	opts := e.guestOpts(g, testguest.Cmdline(testguest.Hostname("vp-it-net"), testguest.Network(), testguest.HTTP(8080), testguest.GuestAgent()))
	c, h := e.launch(ctx)
	st, err := c.Sync(ctx, e.netVMI(apiv1.PhaseScheduled, fwd, udp), opts)
	wantState(t, st, err, "Running", "Booted")
	// QEMU listens for both, as the launcher asked it by HMP.
	out, err := exec.CommandContext(ctx, "virsh", "-c", e.uri, "qemu-monitor-command", "--hmp", e.domain, "info usernet").CombinedOutput()
	for _, want := range []string{fmt.Sprintf("127.0.0.1 %5d       10.0.2.15  8080", port), fmt.Sprintf("127.0.0.1 %5d       10.0.2.15    53", udpPort)} {
		if err != nil || !strings.Contains(string(out), want) {
			t.Errorf("info usernet (%v) lacks %q:\n%s", err, want, out)
		}
	}

	e.waitConsole(testguest.MarkerHTTPUp)
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	var body string
	testutil.EventuallyNoError(t, 30*time.Second, "an HTTP answer through the forward", func() error {
		var err error
		body, err = httpGet(url)
		return err
	})
	if body != "vp-it-net\n" {
		t.Errorf("GET %s = %q, want the guest's hostname", url, body)
	}

	st = waitAgentAddress(t, ctx, c)
	s := st.GetInterfaces()[0]
	t.Logf("interface: %v", s)
	if s.GetName() != "default" || s.GetMacAddress() != "02:00:00:12:34:56" || s.GetInterfaceName() != "eth0" {
		t.Errorf("interface %v: want default, its MAC, eth0 in the guest", s)
	}
	for _, a := range s.GetIpAddresses() {
		if strings.HasPrefix(a, "fe80:") {
			t.Errorf("link-local %s reported", a)
		}
	}

	// The launcher dies; a new one adopts the running domain.
	if err := syscall.Kill(h.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := waitGone(ctx, h.Pid); err != nil {
		t.Fatal(err)
	}
	c2, h2 := e.launch(ctx)
	st, err = c2.Sync(ctx, e.netVMI(apiv1.PhaseRunning, fwd, udp), opts)
	wantState(t, st, err, "Running", "")
	if body, err := httpGet(url); err != nil || body != "vp-it-net\n" {
		t.Errorf("GET %s after the launcher was replaced = %q, %v", url, body, err)
	}
	waitAgentAddress(t, ctx, c2)

	// Another forward on a port a process of this host holds: refused
	// with the forward's name and why; the guest runs on.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port
	c2.Detach()
	if err := syscall.Kill(h2.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := waitGone(ctx, h2.Pid); err != nil {
		t.Fatal(err)
	}
	c3, _ := e.launch(ctx)
	_, err = c3.Sync(ctx, e.netVMI(apiv1.PhaseRunning, fwd, udp, &apiv1.PortForward{HostPort: int32(busyPort), GuestPort: 22}), opts)
	want := fmt.Sprintf("port forward 127.0.0.1:%d/tcp → guest 22: QEMU: Could not set up host forwarding rule 'tcp:127.0.0.1:%d-:22' (tcp port %d is in use on the host)", busyPort, busyPort, busyPort)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), want) {
		t.Errorf("Sync with a busy port = %v, want FailedPrecondition containing %q", err, want)
	}
	st, err = c3.GetDomain(ctx)
	wantState(t, st, err, "Running", "")
	if body, err := httpGet(url); err != nil || body != "vp-it-net\n" {
		t.Errorf("GET %s after the refused forward = %q, %v", url, body, err)
	}
}

// TestBusyPortFailsTheStart: a new guest whose forward cannot bind does
// not run: the Sync that started it fails naming the forward, and the
// domain is destroyed.
func TestBusyPortFailsTheStart(t *testing.T) {
	e := newEnv(t)
	g := installGuest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port

	c, _ := e.launch(ctx)
	_, err = c.Sync(ctx, e.netVMI(apiv1.PhaseScheduled, &apiv1.PortForward{HostPort: int32(port), GuestPort: 80}), e.guestOpts(g, testguest.Cmdline()))
	want := fmt.Sprintf("network: interface default: port forward 127.0.0.1:%d/tcp → guest 80: QEMU: Could not set up host forwarding rule", port)
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), want) {
		t.Fatalf("Sync = %v, want FailedPrecondition containing %q", err, want)
	}
	st, err := c.GetDomain(ctx)
	wantState(t, st, err, "Shutoff", "Destroyed")
}
