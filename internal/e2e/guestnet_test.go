package e2e

import (
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
)

// TestGuestCannotReachHost is issue 13's guest → host attack: QEMU
// user-mode networking maps the guest's gateway, 10.0.2.2 (fec0::2), to
// the host's 127.0.0.1 (::1), where the agent serves its metrics, pprof
// and API. A guest probes HTTP servers of the test's on the host's
// loopback through the gateway addresses, on 127.0.0.1 itself (packets
// a hostile guest sends out of its NIC), and on another address of the
// host; the node agent's guest firewall (internal/guestnet) must refuse
// all of them. What must keep working does: DHCP from QEMU, and the
// guest's connections to machines other than the host, here a server in
// a network namespace of the test's own, behind a veth pair. All traffic
// stays on this machine.
func TestGuestCannotReachHost(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	id := randomID(t)

	loop4 := serveToken(t, listen(t, "tcp4", "127.0.0.1:0"), "loopback-"+id)
	loop6 := serveToken(t, listen(t, "tcp6", "[::1]:0"), "loopback6-"+id)
	link := newVethNS(t, id)
	hostAddr := serveToken(t, listen(t, "tcp4", net.JoinHostPort(link.hostIP, "0")), "hostaddr-"+id)
	other := serveToken(t, link.listen(net.JoinHostPort(link.nsIP, "0")), "othermachine-"+id)

	gw := "10.0.2.2:" + loop4.port
	gw6 := "[fec0::2]:" + loop6.port
	direct := "127.0.0.1:" + loop4.port
	// Loopback last: the guest reroutes 127.0.0.0/8 for it.
	targets := []string{other.addr, gw, gw6, hostAddr.addr, direct}
	mustNotReach := map[string]*tokenServer{gw: loop4, gw6: loop6, hostAddr.addr: hostAddr, direct: loop4}

	vm := c.guestVM("probe", apiv1.RunStrategyAlways, testguest.Cmdline(testguest.Hostname("vp-e2e-net"), testguest.NetProbe(targets...)))
	spec := vm.GetSpec().GetTemplate().GetSpec()
	spec.Networks = []*apiv1.Network{{Name: "default", User: &apiv1.UserNetwork{}}}
	spec.Domain.Devices = &apiv1.Devices{Interfaces: []*apiv1.Interface{{Name: "default"}}}
	c.create(vm)
	vmi := c.waitRunning("probe", "")
	con := c.console(vmi.GetMetadata().GetUid())
	up := testguest.Fields(con.waitMarker(testguest.MarkerNetUp, bootTimeout))
	if up["ip"] != "10.0.2.15/24" || up["router"] != "10.0.2.2" {
		t.Errorf("DHCP lease %v, want QEMU's 10.0.2.15/24 via 10.0.2.2", up)
	}
	con.waitMarker(testguest.MarkerNetProbeDone, 2*time.Minute)
	probes, _ := testguest.NetProbes(con.text())
	t.Logf("probes: %v", probes)

	if p := probes[other.addr]; !p.Reached || p.Body != other.token {
		t.Errorf("the guest could not reach another machine (%s): %+v; the firewall must leave outbound NAT alone", other.addr, p)
	}
	assertRefused(t, probes, mustNotReach, loop4, loop6, hostAddr)
	// The host's own processes are not confined.
	if body, err := httpGet(loop4.addr); err != nil || body != loop4.token {
		t.Errorf("the test's own request to %s: %q, %v", loop4.addr, body, err)
	}
}

// tokenServer answers every request with its token and records who
// asked.
type tokenServer struct {
	addr, port, token string
	mu                sync.Mutex
	from              []string
}

func listen(t *testing.T, network, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func serveToken(t *testing.T, ln net.Listener, token string) *tokenServer {
	t.Helper()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	s := &tokenServer{addr: ln.Addr().String(), port: port, token: token}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.from = append(s.from, r.RemoteAddr)
		s.mu.Unlock()
		io.WriteString(w, token+"\n")
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return s
}

func (s *tokenServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.from...)
}

func httpGet(addr string) (string, error) {
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get("http://" + addr + "/")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

// vethNS is a network namespace of the test's own joined to the host by a
// veth pair with a /30 of 198.18.0.0/15 (benchmarking, never routed):
// hostIP is an address of the host, nsIP another machine as far as the
// host can tell.
type vethNS struct {
	t              *testing.T
	name           string
	hostIP, nsIP   string
	hostIf, peerIf string
}

func newVethNS(t *testing.T, id string) *vethNS {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("ip not found (Debian package iproute2): %v", err)
	}
	b := make([]byte, 2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	// 198.18.0.0/15 holds 2^15 /30s.
	n := (int(b[0])<<8 | int(b[1])) & 0x7fff
	base := 198<<24 | 18<<16 | n<<2
	ip := func(host int) string {
		v := base | host
		return fmt.Sprintf("%d.%d.%d.%d", v>>24&0xff, v>>16&0xff, v>>8&0xff, v&0xff)
	}
	v := &vethNS{t: t, name: "vpe2e-" + id, hostIP: ip(1), nsIP: ip(2), hostIf: "vpgn" + id + "h", peerIf: "vpgn" + id + "g"}
	v.ip("netns", "add", v.name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", v.name).Run() })
	v.ip("link", "add", v.hostIf, "type", "veth", "peer", "name", v.peerIf, "netns", v.name)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", v.hostIf).Run() })
	v.ip("addr", "add", v.hostIP+"/30", "dev", v.hostIf)
	v.ip("link", "set", v.hostIf, "up")
	v.ip("-n", v.name, "addr", "add", v.nsIP+"/30", "dev", v.peerIf)
	v.ip("-n", v.name, "link", "set", v.peerIf, "up")
	v.ip("-n", v.name, "link", "set", "lo", "up")
	return v
}

func (v *vethNS) ip(args ...string) {
	v.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		v.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// listen listens on addr inside the namespace: the socket is created on
// a thread that entered it, and stays there whoever serves it.
func (v *vethNS) listen(addr string) net.Listener {
	v.t.Helper()
	return listenIn(v.t, v.name, "tcp4", addr)
}

// listenIn listens on addr inside network namespace netns (a name under
// /run/netns): the socket is created on a thread that entered it, and
// stays there whoever serves it.
func listenIn(t *testing.T, netns, network, addr string) net.Listener {
	t.Helper()
	f, err := os.Open("/run/netns/" + netns)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type res struct {
		ln  net.Listener
		err error
	}
	ch := make(chan res)
	go func() {
		// Never unlocked: the thread ends with this goroutine, so no
		// other goroutine runs in the namespace.
		runtime.LockOSThread()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- res{nil, fmt.Errorf("setns %s: %w", netns, err)}
			return
		}
		ln, err := net.Listen(network, addr)
		ch <- res{ln, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.ln
}

// assertRefused checks that the guest's probe of each of mustNotReach's
// targets was refused by the guest firewall (not reached, not merely
// lost), and that none of servers, which the targets lead to, saw a
// request.
func assertRefused(t *testing.T, probes map[string]testguest.ProbeResult, mustNotReach map[string]*tokenServer, servers ...*tokenServer) {
	t.Helper()
	for target, srv := range mustNotReach {
		p := probes[target]
		switch {
		case p.Target == "":
			t.Errorf("no probe result for %s", target)
		case p.Reached:
			t.Errorf("the guest reached the host through %s (%s answered %q)", target, srv.addr, p.Body)
		case !strings.Contains(p.Error, "refused"):
			t.Errorf("probe of %s failed with %q, want refused by the guest firewall", target, p.Error)
		}
	}
	for _, srv := range servers {
		if from := srv.requests(); len(from) > 0 {
			t.Errorf("%s served the guest: requests from %v", srv.addr, from)
		}
	}
}
