package driver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
)

// vlanRecorder stands in for bridgevlan: it records the calls and fails
// them while err is set.
type vlanRecorder struct {
	mu    sync.Mutex
	calls []string
	err   error
}

func (r *vlanRecorder) set(pid int, bridge, tap string, vid int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf("%d %s %s %d", pid, bridge, tap, vid))
	return r.err
}

func (r *vlanRecorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

const testQEMUPid = 4242

// netVMI is a VMI with a user interface that forwards two ports and a
// bridge interface on VLAN 10.
func netVMI(phase string) *apiv1.VirtualMachineInstance {
	v := vmi(phase)
	v.Spec.Networks = []*apiv1.Network{
		{Name: "default", User: &apiv1.UserNetwork{PortForwards: []*apiv1.PortForward{
			{HostPort: 18080, GuestPort: 80},
			{HostPort: 15353, GuestPort: 53, Protocol: "udp", HostAddress: "0.0.0.0"},
		}}},
		{Name: "lan", Bridge: &apiv1.BridgeNetwork{Bridge: "br0", Vlan: 10}},
	}
	v.Spec.Domain.Devices = &apiv1.Devices{Interfaces: []*apiv1.Interface{
		{Name: "default", MacAddress: "02:00:00:00:00:01"},
		{Name: "lan", MacAddress: "02:00:00:00:00:02"},
	}}
	return v
}

// writeQEMUPid stands in for libvirtd's pid file of the running QEMU.
func (h *harness) writeQEMUPid() {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.pids, testDomain+".pid"), []byte(fmt.Sprint(testQEMUPid)), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) forwards() []forward {
	var out []forward
	h.conn.withNet(testDomain, func(n *fakeNet) { out = slices.Clone(n.forwards["hostua-net-default"]) })
	return out
}

var wantForwards = []forward{
	{proto: "tcp", hostAddr: netip.MustParseAddr("127.0.0.1"), hostPort: 18080, guestPort: 80},
	{proto: "udp", hostAddr: netip.IPv4Unspecified(), hostPort: 15353, guestPort: 53},
}

func TestNetworkOnStartAndReattach(t *testing.T) {
	h := newHarness(t)
	h.writeQEMUPid()
	st := h.mustSync(netVMI(apiv1.PhaseScheduled))
	wantState(t, st, "Running", "Booted")
	if got := h.forwards(); !slices.Equal(got, wantForwards) {
		t.Errorf("forwards after start = %v, want %v", got, wantForwards)
	}
	tap := domxml.TapName(testUID, "lan")
	wantVLAN := []string{fmt.Sprintf("%d br0 %s 10", testQEMUPid, tap)}
	if got := h.vlans.got(); !slices.Equal(got, wantVLAN) {
		t.Errorf("VLAN calls = %v, want %v", got, wantVLAN)
	}

	// A new launcher for the running domain (after a crash) finds the
	// forwards in place and adds none: QEMU would refuse a second rule.
	adds := h.conn.callsMatching("HMP hostfwd_add")
	h.d.Close()
	h.d = h.newDriver()
	st = h.mustSync(netVMI(apiv1.PhaseRunning))
	wantState(t, st, "Running", "Booted")
	if n := h.conn.callsMatching("HMP hostfwd_add") - adds; n != 0 {
		t.Errorf("reattaching added %d forwards", n)
	}
	if got := h.forwards(); !slices.Equal(got, wantForwards) {
		t.Errorf("forwards after reattach = %v", got)
	}
	// The VLAN is set again: idempotent, and the tap may have been
	// recreated meanwhile.
	if got := h.vlans.got(); len(got) != 2 || got[1] != wantVLAN[0] {
		t.Errorf("VLAN calls after reattach = %v", got)
	}

	// A forward that went to another guest port is replaced.
	h.conn.withNet(testDomain, func(n *fakeNet) { n.forwards["hostua-net-default"][0].guestPort = 8080 })
	h.d.Close()
	h.d = h.newDriver()
	h.mustSync(netVMI(apiv1.PhaseRunning))
	if got := h.forwards(); !slices.ContainsFunc(got, func(f forward) bool { return f == wantForwards[0] }) || len(got) != 2 {
		t.Errorf("forwards after a wrong guest port = %v", got)
	}
}

func TestPortForwardThatCannotBindFailsTheStart(t *testing.T) {
	h := newHarness(t)
	h.writeQEMUPid()
	h.conn.setBusy(18080)
	_, err := h.sync(netVMI(apiv1.PhaseScheduled))
	wantCode(t, err, codes.FailedPrecondition,
		"network: interface default: port forward 127.0.0.1:18080/tcp → guest 80: QEMU: Could not set up host forwarding rule 'tcp:127.0.0.1:18080-:80'")
	// It was this Sync's start: the guest does not run without it.
	if s := h.conn.get(testDomain); s.state != StateShutoff || ReasonName(s.state, s.reason) != "Destroyed" {
		t.Errorf("domain %s/%s after the failed forward, want destroyed", s.state, ReasonName(s.state, s.reason))
	}
}

func TestPortForwardFailureKeepsARunningGuest(t *testing.T) {
	h := newHarness(t)
	h.writeQEMUPid()
	h.mustSync(netVMI(apiv1.PhaseScheduled))
	// The forward went (an operator removed it by hand) and another
	// process took its port; then the launcher restarts.
	h.conn.withNet(testDomain, func(n *fakeNet) { n.forwards["hostua-net-default"] = n.forwards["hostua-net-default"][1:] })
	h.conn.setBusy(18080)
	h.d.Close()
	h.d = h.newDriver()
	_, err := h.sync(netVMI(apiv1.PhaseRunning))
	wantCode(t, err, codes.FailedPrecondition, "port forward 127.0.0.1:18080/tcp → guest 80: QEMU: Could not set up host forwarding rule")
	if s := h.conn.get(testDomain); s.state != StateRunning {
		t.Errorf("a guest that ran before was stopped: %s", s.state)
	}
}

func TestVLANFailureFailsTheStart(t *testing.T) {
	h := newHarness(t)
	h.writeQEMUPid()
	h.vlans.err = errors.New("bridge br0 does not filter VLANs")
	_, err := h.sync(netVMI(apiv1.PhaseScheduled))
	wantCode(t, err, codes.FailedPrecondition, "network: interface lan: bridge br0 does not filter VLANs")
	if s := h.conn.get(testDomain); s.state != StateShutoff {
		t.Errorf("domain %s after the failed VLAN, want destroyed", s.state)
	}
	// Without QEMU's pid there is no namespace to work in.
	h2 := newHarness(t)
	_, err = h2.sync(netVMI(apiv1.PhaseScheduled))
	wantCode(t, err, codes.FailedPrecondition, "VLAN 10: QEMU's process is unknown")
}

// TestNetworkWhenMigratedIn: the receiving domain's tap goes on its VLAN
// when the incoming QEMU starts, its forwards once the guest runs here;
// both from libvirt's events, before any Sync.
func TestNetworkWhenMigratedIn(t *testing.T) {
	h := newHarness(t)
	h.writeQEMUPid()
	v := withUUID(netVMI(apiv1.PhaseRunning))
	if _, err := h.d.Incoming(context.Background(), &launcherpb.IncomingRequest{MigrationUid: "m", Sync: &launcherpb.SyncRequest{Vmi: v}}); err != nil {
		t.Fatal(err)
	}
	h.setState(StatePaused, 2)    // Paused/Migration
	h.conn.emit(testDomain, 2, 1) // Started/Migrated
	tap := domxml.TapName(testUID, "lan")
	waitFor(t, "the VLAN once the incoming QEMU started", func() bool { return len(h.vlans.got()) == 1 })
	if got := h.vlans.got()[0]; got != fmt.Sprintf("%d br0 %s 10", testQEMUPid, tap) {
		t.Errorf("VLAN call %q", got)
	}
	if got := h.forwards(); len(got) != 0 {
		t.Errorf("forwards before the guest arrived: %v", got)
	}
	h.setState(StateRunning, 2)   // Running/Migrated
	h.conn.emit(testDomain, 4, 1) // Resumed/Migrated
	waitFor(t, "the forwards once the guest runs here", func() bool { return len(h.forwards()) == 2 })
	if got := h.forwards(); !slices.Equal(got, wantForwards) {
		t.Errorf("forwards = %v", got)
	}
}

func (h *harness) setState(st State, reason int) {
	h.conn.mu.Lock()
	defer h.conn.mu.Unlock()
	s := h.conn.doms[testDomain]
	s.state, s.reason = st, reason
}

func withUUID(v *apiv1.VirtualMachineInstance) *apiv1.VirtualMachineInstance {
	v.Status.DomainUuid = "6f1c0e1e-4d7b-4d55-9a43-1b2f3c4d5e6f"
	return v
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, what, cond)
}

func listenTCP(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

func listenUDP(t *testing.T) int {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc.LocalAddr().(*net.UDPAddr).Port
}

func TestParseUsernet(t *testing.T) {
	// QEMU 7.2's output with two netdevs, as `virsh qemu-monitor-command
	// --hmp DOMAIN 'info usernet'` printed it.
	out := "Hub -1 (hostua-net-default):\r\n" +
		"  Protocol[State]    FD  Source Address  Port   Dest. Address  Port RecvQ SendQ\r\n" +
		"  TCP[HOST_FORWARD]  20       127.0.0.1 18085       10.0.2.15    80     0     0\r\n" +
		"  TCP[HOST_FORWARD]  19               * 18084       10.0.2.15    80     0     0\r\n" +
		"  UDP[HOST_FORWARD]  17       127.0.0.1 18081       10.0.2.15    53     0     0\r\n" +
		"  TCP[ESTABLISHED]   21       10.0.2.15 40000        10.0.2.2  8080     0     0\r\n" +
		"Hub -1 (hostua-net-other):\r\n" +
		"  Protocol[State]    FD  Source Address  Port   Dest. Address  Port RecvQ SendQ\r\n" +
		"  TCP[HOST_FORWARD]  22       127.0.0.1 18090       10.0.2.15    22     0     0\r\n"
	got := parseUsernet(out, "hostua-net-default")
	want := []forward{
		{proto: "tcp", hostAddr: netip.MustParseAddr("127.0.0.1"), hostPort: 18085, guestPort: 80},
		{proto: "tcp", hostAddr: netip.IPv4Unspecified(), hostPort: 18084, guestPort: 80},
		{proto: "udp", hostAddr: netip.MustParseAddr("127.0.0.1"), hostPort: 18081, guestPort: 53},
	}
	if !slices.Equal(got, want) {
		t.Errorf("parseUsernet = %v, want %v", got, want)
	}
	if got := parseUsernet(out, "hostua-net-none"); len(got) != 0 {
		t.Errorf("another netdev's forwards: %v", got)
	}
}

func TestForwardNames(t *testing.T) {
	f, err := forwardOf(&apiv1.PortForward{HostPort: 18080, GuestPort: 80})
	if err != nil {
		t.Fatal(err)
	}
	if f.String() != "127.0.0.1:18080/tcp → guest 80" || f.rule() != "tcp:127.0.0.1:18080-:80" {
		t.Errorf("defaults: %s, %s", f, f.rule())
	}
	f6, _ := forwardOf(&apiv1.PortForward{HostPort: 53, GuestPort: 53, Protocol: "udp", HostAddress: "::1"})
	if f6.String() != "[::1]:53/udp → guest 53" || f6.hostPart() != "udp:[::1]:53" {
		t.Errorf("IPv6: %s, %s", f6, f6.hostPart())
	}
	if _, err := forwardOf(&apiv1.PortForward{HostPort: 1, GuestPort: 1, HostAddress: "localhost"}); err == nil {
		t.Error("a host name was taken for an address")
	}
}

func TestBindHint(t *testing.T) {
	couldNot := errors.New("QEMU: Could not set up host forwarding rule 'x'")
	low, _ := forwardOf(&apiv1.PortForward{HostPort: 81, GuestPort: 80})
	if h := bindHint(low, 0, couldNot); !strings.Contains(h, "port 81 is privileged") {
		t.Errorf("privileged port: %q", h)
	}
	v6, _ := forwardOf(&apiv1.PortForward{HostPort: 18080, GuestPort: 80, HostAddress: "::1"})
	if h := bindHint(v6, 0, errors.New("QEMU: Invalid host forwarding rule 'x' (Bad host address)")); !strings.Contains(h, "IPv4 host addresses only") {
		t.Errorf("IPv6: %q", h)
	}
	if h := bindHint(low, 0, errors.New("QEMU: unrecognized netdev id 'x'")); h != "" {
		t.Errorf("another error got the hint %q", h)
	}
}

// TestPortInUse reads this process's own /proc/PID/net tables: a TCP
// listener and a UDP socket are found, a closed port is not.
func TestPortInUse(t *testing.T) {
	tcp, udp := listenTCP(t), listenUDP(t)
	pid := os.Getpid()
	if !portInUse(pid, "tcp", tcp) || !portInUse(pid, "udp", udp) {
		t.Errorf("portInUse missed the test's own sockets (tcp %d, udp %d)", tcp, udp)
	}
	if portInUse(pid, "tcp", udp) && portInUse(pid, "udp", tcp) {
		t.Errorf("ports reported in use on both protocols")
	}
	fw := forward{proto: "tcp", hostAddr: netip.MustParseAddr("127.0.0.1"), hostPort: tcp, guestPort: 80}
	if h := bindHint(fw, pid, errors.New("QEMU: Could not set up host forwarding rule")); !strings.Contains(h, fmt.Sprintf("tcp port %d is in use on the host", tcp)) {
		t.Errorf("busy port: %q", h)
	}
}
