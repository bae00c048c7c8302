package guestnet

// The firewall for real: nft in a network namespace of the test's own
// (never the host's ruleset), and connections from a process of another
// user standing in for QEMU. Needs root (CI runs the tests as root) and
// the nft and ip commands.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// guestUID stands in for QEMU's user: nobody.
const guestUID = 65534

// The helper process: this test binary, run as guestUID in the test's
// namespace, dials or listens as told by the environment and prints
// what happened, a line per address.
const (
	envHelper = "GUESTNET_TEST_HELPER" // "dial" or "listen"
	envNet    = "GUESTNET_TEST_NET"    // tcp, udp
	envAddr   = "GUESTNET_TEST_ADDR"   // dial: space-separated
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envHelper); mode != "" {
		for _, addr := range strings.Fields(os.Getenv(envAddr)) {
			fmt.Println(helper(mode, os.Getenv(envNet), addr))
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// helper dials addr and says "ok" when it got the server's answer,
// "refused" when the connection was refused, or the error; or listens
// on addr, prints the port, and serves one connection.
func helper(mode, network, addr string) string {
	switch mode {
	case "dial":
		c, err := net.DialTimeout(network, addr, 5*time.Second)
		if err != nil {
			return outcome(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if network == "udp" {
			if _, err := c.Write([]byte("ping\n")); err != nil {
				return outcome(err)
			}
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return outcome(err)
		}
		if line != "hi\n" {
			return fmt.Sprintf("answer %q", line)
		}
		return "ok"
	case "listen":
		if network == "udp" {
			// A UDP port forward's socket: it answers whoever sent
			// to it.
			pc, err := net.ListenPacket(network, addr)
			if err != nil {
				return outcome(err)
			}
			fmt.Println(pc.LocalAddr().(*net.UDPAddr).Port)
			buf := make([]byte, 64)
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return outcome(err)
			}
			if _, err := pc.WriteTo([]byte("hi\n"), from); err != nil {
				return outcome(err)
			}
			return "served"
		}
		ln, err := net.Listen(network, addr)
		if err != nil {
			return outcome(err)
		}
		fmt.Println(ln.Addr().(*net.TCPAddr).Port)
		c, err := ln.Accept()
		if err != nil {
			return outcome(err)
		}
		io.WriteString(c, "hi\n")
		c.Close()
		return "served"
	}
	return "unknown mode " + mode
}

func outcome(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "refused"
	case errors.Is(err, syscall.EPERM):
		// A locally sent datagram the output hook rejects fails at
		// send.
		return "not permitted"
	}
	return err.Error()
}

// testNS is a network namespace of the test's own, alive while its file
// is open.
type testNS struct {
	t    *testing.T
	f    *os.File
	path string
	exe  string // this test binary, where guestUID may run it
}

func newTestNS(t *testing.T) *testNS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: nft and network namespaces")
	}
	for _, tool := range []string{"nft", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not found (Debian packages nftables, iproute2): %v", tool, err)
		}
	}
	type res struct {
		f   *os.File
		err error
	}
	ch := make(chan res)
	go func() {
		// Never unlocked: the thread ends with this goroutine.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ch <- res{nil, fmt.Errorf("unshare: %w", err)}
			return
		}
		f, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		ch <- res{f, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { r.f.Close() })
	ns := &testNS{t: t, f: r.f, path: fmt.Sprintf("/proc/self/fd/%d", r.f.Fd())}
	// A copy of this binary that guestUID can reach: go test's build
	// directory is private.
	dir := testguest.ReachableDir(t, "guestnet-test-")
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	ns.exe = filepath.Join(dir, "guestnet.test")
	if err := os.WriteFile(ns.exe, self, 0o755); err != nil {
		t.Fatal(err)
	}
	return ns
}

// do runs fn in the namespace.
func (ns *testNS) do(fn func() error) {
	ns.t.Helper()
	if err := inNetNS(ns.path, fn); err != nil {
		ns.t.Fatal(err)
	}
}

// run runs a command in the namespace.
func (ns *testNS) run(name string, args ...string) {
	ns.t.Helper()
	ns.do(func() error {
		if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
		}
		return nil
	})
}

// serve starts a server of root's in the namespace that answers "hi".
func (ns *testNS) serve(network, addr string) string {
	ns.t.Helper()
	var bound string
	ns.do(func() error {
		if network == "udp" {
			pc, err := net.ListenPacket(network, addr)
			if err != nil {
				return err
			}
			ns.t.Cleanup(func() { pc.Close() })
			go func() {
				buf := make([]byte, 64)
				for {
					_, from, err := pc.ReadFrom(buf)
					if err != nil {
						return
					}
					pc.WriteTo([]byte("hi\n"), from)
				}
			}()
			bound = pc.LocalAddr().String()
			return nil
		}
		ln, err := net.Listen(network, addr)
		if err != nil {
			return err
		}
		ns.t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				io.WriteString(c, "hi\n")
				c.Close()
			}
		}()
		bound = ln.Addr().String()
		return nil
	})
	return bound
}

// listenAsGuest starts a helper listening on addr as guestUID, as QEMU
// listens for a port forward, and returns its port; it serves one
// connection or datagram.
func (ns *testNS) listenAsGuest(network, addr string) string {
	ns.t.Helper()
	var port string
	ns.do(func() error {
		cmd := ns.helperCmd("listen", network, addr)
		out, err := cmd.StdoutPipe()
		if err != nil {
			return err
		}
		if err := cmd.Start(); err != nil {
			return err
		}
		ns.t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		port, err = bufio.NewReader(out).ReadString('\n')
		return err
	})
	return strings.TrimSpace(port)
}

// helperCmd is the helper process in the namespace, as guestUID.
func (ns *testNS) helperCmd(mode, network, addr string) *exec.Cmd {
	cmd := exec.Command(ns.exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"="+mode, envNet+"="+network, envAddr+"="+addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: guestUID, Gid: guestUID}}
	return cmd
}

// dialAs dials each address from the namespace as guestUID (in one
// helper process: starting one takes a while under -race), or as root,
// and returns what happened to each.
func (ns *testNS) dialAs(guest bool, network string, addrs ...string) []string {
	ns.t.Helper()
	var got []string
	if !guest {
		ns.do(func() error {
			for _, a := range addrs {
				got = append(got, helper("dial", network, a))
			}
			return nil
		})
		return got
	}
	var out []byte
	ns.do(func() error {
		var err error
		out, err = ns.helperCmd("dial", network, strings.Join(addrs, " ")).Output()
		return err
	})
	got = strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(got) != len(addrs) {
		ns.t.Fatalf("helper answered %q for %v", out, addrs)
	}
	return got
}

// dial1 is dialAs for one address.
func (ns *testNS) dial1(guest bool, network, addr string) string {
	ns.t.Helper()
	return ns.dialAs(guest, network, addr)[0]
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func TestFirewall(t *testing.T) {
	ns := newTestNS(t)
	checkSameNetNS(t, ns)
	ns.run("ip", "link", "set", "lo", "up")
	// An address of the host that is not loopback.
	ns.run("ip", "link", "add", "vp0", "type", "veth", "peer", "name", "vp1")
	ns.run("ip", "addr", "add", "198.18.0.1/24", "dev", "vp0")
	ns.run("ip", "link", "set", "vp0", "up")
	ns.run("ip", "link", "set", "vp1", "up")

	lo4 := ns.serve("tcp", "127.0.0.1:0")
	lo6 := ns.serve("tcp", "[::1]:0")
	host := ns.serve("tcp", "198.18.0.1:0")
	udp := ns.serve("udp", "127.0.0.1:0")
	dns := ns.serve("tcp", "127.0.0.2:53")

	// Without the firewall the stand-in reaches all of it: what the
	// checks below see after it is the firewall's doing.
	tcpTargets := []string{lo4, lo6, host, dns}
	for i, got := range append(ns.dialAs(true, "tcp", tcpTargets...), ns.dial1(true, "udp", udp)) {
		if got != "ok" {
			t.Fatalf("before the firewall, target %d of %v, %s: %s, want ok", i, tcpTargets, udp, got)
		}
	}

	ctx := context.Background()
	fw, err := New(Config{UIDs: []uint32{guestUID}, NetNS: func() (string, error) { return ns.path, nil }, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := fw.Ensure(ctx); err != nil || !changed {
		t.Fatalf("first Ensure = %v, %v; want installed", changed, err)
	}
	if changed, err := fw.Ensure(ctx); err != nil || changed {
		t.Fatalf("second Ensure = %v, %v; want left alone", changed, err)
	}

	checkConfined := func(when string) {
		t.Helper()
		want := []string{
			"refused", // loopback, where slirp sends 10.0.2.2
			"refused", // ::1, where slirp sends fec0::2
			"refused", // another address of the host
			"ok",      // DNS on loopback, where slirp forwards the guest's resolver
		}
		got := ns.dialAs(true, "tcp", tcpTargets...)
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: tcp %s as the QEMU user: %s, want %s", when, tcpTargets[i], got[i], want[i])
			}
		}
		if got := ns.dial1(true, "udp", udp); got != "not permitted" {
			t.Errorf("%s: udp %s as the QEMU user: %s, want not permitted", when, udp, got)
		}
		if got := ns.dial1(false, "tcp", lo4); got != "ok" {
			t.Errorf("%s: tcp %s as root, who is not QEMU: %s, want ok", when, lo4, got)
		}
	}
	checkConfined("installed")

	// QEMU's own listeners still answer (VNC, hostfwd): their replies
	// are not new connections; nor are a UDP port forward's answers to
	// its client, which conntrack sees in the reply direction.
	for _, network := range []string{"tcp", "udp"} {
		port := ns.listenAsGuest(network, "127.0.0.1:0")
		if got := ns.dial1(false, network, net.JoinHostPort("127.0.0.1", port)); got != "ok" {
			t.Errorf("root to the QEMU user's %s listener: %s, want ok", network, got)
		}
	}

	// A firewall reload that flushes the chain: Ensure puts it back.
	ns.run("nft", "flush", "chain", "inet", Table, chainGuest)
	if got := ns.dial1(true, "tcp", lo4); got != "ok" {
		t.Fatalf("with the chain flushed: %s, want ok (else the repair below proves nothing)", got)
	}
	if changed, err := fw.Ensure(ctx); err != nil || !changed {
		t.Fatalf("Ensure after a flush = %v, %v; want reinstalled", changed, err)
	}
	checkConfined("repaired")

	// A table for another user is replaced whole.
	other, err := New(Config{UIDs: []uint32{guestUID - 1}, NetNS: fw.nft.netns, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if changed, err := other.Ensure(ctx); err != nil || !changed {
		t.Fatalf("Ensure for another user = %v, %v", changed, err)
	}
	if got := ns.dial1(true, "tcp", lo4); got != "ok" {
		t.Errorf("after the table for another user replaced ours: %s, want ok", got)
	}
	if changed, err := fw.Ensure(ctx); err != nil || !changed {
		t.Fatalf("Ensure back = %v, %v", changed, err)
	}

	// Run puts back a deleted table within a period, on its clock.
	clk := clocktesting.NewFakeClock(time.Now())
	keeper, err := New(Config{UIDs: []uint32{guestUID}, NetNS: fw.nft.netns, Clock: clk, Period: time.Minute, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); keeper.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-done })
	ns.run("nft", "delete", "table", "inet", Table)
	testutil.Eventually(t, 30*time.Second, "Run to put the deleted table back", func() bool {
		if clk.HasWaiters() {
			clk.Step(time.Minute)
		}
		listing, err := fw.nft.listTable(ctx)
		if err != nil || listing == nil {
			return false
		}
		why, err := verify(listing, fw.rules, fw.eps)
		return err == nil && why == ""
	})
	checkConfined("put back by Run")
}

func TestNewRefuses(t *testing.T) {
	for _, uids := range [][]uint32{nil, {0}, {64055, 0}} {
		if _, err := New(Config{UIDs: uids}); err == nil {
			t.Errorf("New(UIDs %v) succeeded", uids)
		}
	}
}

func TestMissingNFT(t *testing.T) {
	fw, err := New(Config{UIDs: []uint32{guestUID}, NFT: filepath.Join(t.TempDir(), "nft")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fw.Ensure(context.Background()); err == nil || !strings.Contains(err.Error(), "nftables") {
		t.Errorf("Ensure without nft: %v, want an error naming the nftables package", err)
	}
}

// checkSameNetNS: a process started in the namespace is in it, one
// started outside is not.
func checkSameNetNS(t *testing.T, ns *testNS) {
	t.Helper()
	start := func() *exec.Cmd {
		cmd := exec.Command("sleep", "600")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}
	outside := start()
	var inside *exec.Cmd
	ns.do(func() error { inside = start(); return nil })
	for _, tc := range []struct {
		cmd  *exec.Cmd
		want bool
	}{{inside, true}, {outside, false}} {
		same, err := SameNetNS(fmt.Sprintf("/proc/%d/ns/net", tc.cmd.Process.Pid), ns.path)
		if err != nil || same != tc.want {
			t.Errorf("SameNetNS(child, test namespace) = %v, %v; want %v", same, err, tc.want)
		}
	}
}
