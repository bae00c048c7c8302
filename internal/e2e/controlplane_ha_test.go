package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/bench"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	mncluster "github.com/virtplane/terraform-provider-virtplane/internal/testutil/cluster"
)

// The control plane's election lease in these tests: etcd's floor for
// --leader-lease, so that a takeover is quick to see.
const haLeaderLease = 5 * time.Second

// TestControlPlaneOnEmbeddedEtcdCluster: three servers whose embedded
// etcds form one cluster (the second and third joined with `store member
// add`), one node. See testControlPlaneHA.
func TestControlPlaneOnEmbeddedEtcdCluster(t *testing.T) { testControlPlaneHA(t, false) }

// TestControlPlaneOnExternalEtcdCluster: three servers on a three-member
// cluster of Debian's etcd with client-certificate TLS, one node; quorum
// is lost by losing two etcd members. See testControlPlaneHA.
func TestControlPlaneOnExternalEtcdCluster(t *testing.T) { testControlPlaneHA(t, true) }

// testControlPlaneHA: SIGKILL the leading server (whose embedded member
// handed etcd's raft leadership to another) → another leads within the
// election lease; a VM from before keeps its QEMU; a VM created after
// runs; a console opens through a surviving server. Then quorum is lost
// (a second server, or two etcd members): writes fail saying "no
// quorum", the node's lease runs out without a guest stopping; a member
// comes back and writes resume. Then terraform applies through a
// provider listing all three servers, the dead one first, and (embedded)
// the dead member is replaced.
func testControlPlaneHA(t *testing.T, external bool) {
	requireEnv(t)
	if external {
		requireEtcd(t)
	}
	provider := buildProviderAsync(t)
	const lease, heartbeat = 10 * time.Second, 2 * time.Second
	c := newMultiNodeCluster(t, mnOptions{nodes: 1, servers: 3, externalEtcd: external,
		nodeLease: lease, heartbeat: heartbeat, serverArgs: []string{"--leader-lease", haLeaderLease.String()}})
	t.Cleanup(c.dumpOnFailure)
	n := c.nodes[0]
	// Through every server from here on, as users configure clients.
	c.api = c.multiEndpointClient()

	c.create(c.guestVM("before", n, "virtplane.tick"))
	c.waitRunning("before")
	beforePid := c.waitQEMUPid(n, "before")

	// 1. The leading server dies.
	old := c.waitLeader(nil)
	if !external {
		// The controllers' leader hands etcd's raft leadership on, so
		// that losing its host costs one election, not two in a row.
		testutil.Eventually(t, stateTimeout, "etcd's raft leader on another server than the controllers' leader", func() bool {
			ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
			defer cancel()
			rl, err := c.RaftLeader(ctx)
			return err == nil && rl != nil && rl != old
		})
	}
	killed := time.Now()
	if err := old.Kill(); err != nil {
		t.Fatal(err)
	}
	next := c.waitLeader(old)
	takeover := time.Since(killed)
	report(t, "control plane (external etcd %v): server %s took over from SIGKILLed %s in %s (election lease %s)",
		external, next.Name, old.Name, takeover.Round(time.Millisecond), haLeaderLease)
	// The dead leader's session lease ran out at most a lease after its
	// last keepalive; etcd revokes expired leases every 500 ms and the
	// next campaigner's watch sees the key go. The rest is room for a
	// loaded two-core host.
	if limit := haLeaderLease + 1500*time.Millisecond; takeover > limit {
		t.Errorf("takeover took %s, more than the lease %s and etcd's revocation", takeover, haLeaderLease)
	}
	c.create(c.guestVM("after", n, "virtplane.tick"))
	c.waitRunning("after")
	c.sameQEMUs(n, map[string]int{"before": beforePid}, "after the takeover")
	// The node agent moved its streams and heartbeats to the survivors.
	c.waitHeartbeatAfter(n, killed)
	survivor := c.liveServerOtherThan(nil)
	con := startCLI(c.ctx, t, []string{"--endpoint", "unix://" + survivor.Socket, "-n", c.ns, "console", "after", "--log"})
	con.waitMarker(testguest.MarkerBooted, bootTimeout)
	report(t, "console of a VM through surviving server %s after the takeover: boot line seen", survivor.Name)
	afterPid := c.waitQEMUPid(n, "after")

	// 2. Quorum lost.
	var restore func()
	if external {
		var downed []*mncluster.EtcdMember
		for _, m := range c.Etcd[:2] {
			if err := m.Kill(); err != nil {
				t.Fatal(err)
			}
			downed = append(downed, m)
		}
		restore = func() {
			if err := c.StartEtcdMember(downed[0]); err != nil {
				t.Fatal(err)
			}
		}
	} else {
		second := c.liveServerOtherThan(nil)
		if err := second.Kill(); err != nil {
			t.Fatal(err)
		}
		restore = func() {
			if err := c.StartServer(c.ctx, second); err != nil {
				t.Fatal(err)
			}
		}
	}
	lost := time.Now()
	api := c.liveServerOtherThan(nil).API
	var noQuorum error
	testutil.Eventually(t, stateTimeout, `writes to fail with "no quorum"`, func() bool {
		ctx, cancel := context.WithTimeout(c.ctx, 15*time.Second)
		defer cancel()
		_, err := api.VMs.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: c.guestVM("during", n, "")})
		if err == nil {
			t.Fatal("a VM was created without an etcd quorum")
		}
		noQuorum = err
		return status.Code(err) == codes.Unavailable && strings.Contains(err.Error(), "no quorum")
	})
	report(t, "quorum lost: a write fails after %s with: %v", time.Since(lost).Round(time.Millisecond), noQuorum)
	// Reads say the same within seconds (etcd's client retries a read
	// on Unavailable for about 2.5 s) rather than serve a view that may
	// be stale or wait out etcd's request timeout.
	readStart := time.Now()
	_, err := api.VMs.Get(c.ctx, &apiv1.GetVirtualMachineRequest{Key: c.key("before")})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "no quorum") {
		t.Errorf("a read without quorum: %v, want Unavailable saying no quorum", err)
	}
	report(t, "quorum lost: a read fails in %s", time.Since(readStart).Round(time.Millisecond))
	// The node's lease runs out while no server can renew it; its Wait
	// guests stay.
	c.waitLeaseRanOut(n, lost)
	qemus := map[string]int{"before": beforePid, "after": afterPid}
	c.sameQEMUs(n, qemus, "without quorum")

	// 3. A member returns: writes resume.
	restore()
	back := time.Now()
	testutil.EventuallyNoError(t, stateTimeout, "a write after quorum is back", func() error {
		_, err := c.api.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: c.guestVM("resumed", n, "")})
		return err
	})
	report(t, "quorum back: writes resume %s after the member was started", time.Since(back).Round(time.Millisecond))
	c.waitRunning("resumed")
	c.sameQEMUs(n, qemus, "after the outage")

	// 4. Terraform through all three, the dead server first.
	endpoints := []string{"https://" + old.TLSAddr}
	for _, s := range c.Servers {
		if s != old {
			endpoints = append(endpoints, "https://"+s.TLSAddr)
		}
	}
	c.terraformApply(provider(), endpoints, n)
	c.waitRunning("tf")

	// 5. The dead server's host is gone for good: replace its member.
	if !external {
		c.replaceDeadMember(old)
	}
}

// replaceDeadMember removes dead's etcd member with the CLI, adds a new
// server in its place (store member add, copied pki) as docs/operations.md
// says, and writes through the new server.
func (c *mnCluster) replaceDeadMember(dead *mncluster.Server) {
	c.t.Helper()
	live := c.liveServerOtherThan(dead)
	began := time.Now()
	if out, err := exec.CommandContext(c.ctx, env.agent, "store", "member", "remove", dead.Name, "--data-dir", live.DataDir).CombinedOutput(); err != nil {
		c.t.Fatalf("store member remove %s: %v: %s", dead.Name, err, out)
	}
	s, err := c.AddServer(c.ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	out, err := exec.CommandContext(c.ctx, env.agent, "store", "member", "list", "--data-dir", s.DataDir).CombinedOutput()
	if err != nil {
		c.t.Fatalf("store member list: %v: %s", err, out)
	}
	voters := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n")[1:] {
		if f := strings.Fields(line); len(f) >= 3 && f[2] == "voter" {
			voters[f[0]] = true
		}
	}
	if len(voters) != 3 || voters[dead.Name] || !voters[s.Name] {
		c.t.Errorf("members after replacing %s with %s:\n%s", dead.Name, s.Name, out)
	}
	if _, err := s.API.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: c.guestVM("replaced", c.nodes[0], "")}); err != nil {
		c.t.Errorf("a write through the replacement server %s: %v", s.Name, err)
	}
	report(c.t, "dead member %s replaced by %s (remove, add, start, promoted) in %s", dead.Name, s.Name, time.Since(began).Round(time.Millisecond))
}

// requireEtcd fails without Debian's etcd: where the libvirt tier runs
// (requireEnv passed), scripts/install-deps.sh test has installed it, so
// its absence is a broken setup, not a reason to skip the tier silently.
func requireEtcd(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("etcd"); err != nil {
		t.Fatalf("etcd is not on PATH (Debian: etcd-server; scripts/install-deps.sh test installs it): %v", err)
	}
}

// buildProviderAsync builds the provider binary while the cluster starts;
// the function returns the directory holding it. The goroutine never
// touches t: it may end after the test.
func buildProviderAsync(t *testing.T) func() string {
	dir := t.TempDir()
	errc := make(chan error, 1)
	go func() {
		errc <- testutil.BuildProvider(t.Context(), filepath.Join(dir, "terraform-provider-virtplane"), "e2e")
	}()
	return func() string {
		t.Helper()
		if err := <-errc; err != nil {
			t.Fatalf("building the provider: %v", err)
		}
		return dir
	}
}

// multiEndpointClient is a TLS client listing every server, with the
// token and CA the servers share.
func (c *mnCluster) multiEndpointClient() *client.Client {
	c.t.Helper()
	p := pki.PathsIn(filepath.Join(c.Servers[0].DataDir, "pki"))
	cli, err := client.Dial(c.ctx, client.Config{Endpoint: strings.Join(c.ServerEndpoints(), ","), TokenFile: p.Token, CAFile: p.CACert})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cli.Close() })
	return cli
}

func (c *mnCluster) create(vm *apiv1.VirtualMachine) {
	c.t.Helper()
	if _, err := c.api.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
		c.t.Fatalf("creating VM %s: %v", vm.GetMetadata().GetName(), err)
	}
}

// sameQEMUs checks that each VM's QEMU on n is still the process it was
// (name to pid): a guest that stopped, even to be restarted, has another.
func (c *mnCluster) sameQEMUs(n *mnNode, pids map[string]int, when string) {
	c.t.Helper()
	for name, pid := range pids {
		if got := n.QEMUPid(c.domain(name)); got != pid {
			c.t.Errorf("VM %s %s: QEMU pid %d, was %d", name, when, got, pid)
		}
	}
}

// waitQEMUPid waits until VM name's QEMU runs on n and returns its pid.
func (c *mnCluster) waitQEMUPid(n *mnNode, name string) int {
	c.t.Helper()
	var pid int
	testutil.Eventually(c.t, stateTimeout, name+"'s QEMU", func() bool {
		pid = n.QEMUPid(c.domain(name))
		return pid > 0
	})
	return pid
}

// waitLeader waits until a live server other than not leads.
func (c *mnCluster) waitLeader(not *mncluster.Server) *mncluster.Server {
	c.t.Helper()
	var (
		got  *mncluster.Server
		last error
	)
	testutil.Eventually(c.t, stateTimeout, "a leading server", func() bool {
		ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
		defer cancel()
		got, last = c.Leader(ctx)
		return got != nil && got != not
	})
	if last != nil {
		c.t.Logf("last election read: %v", last)
	}
	return got
}

// liveServerOtherThan is a running server other than not.
func (c *mnCluster) liveServerOtherThan(not *mncluster.Server) *mncluster.Server {
	c.t.Helper()
	for _, s := range c.Servers {
		if s.Alive() && s != not {
			return s
		}
	}
	c.t.Fatal("no live server")
	return nil
}

// waitHeartbeatAfter waits until node n's heartbeat is newer than t0.
func (c *mnCluster) waitHeartbeatAfter(n *mnNode, t0 time.Time) {
	c.t.Helper()
	testutil.Eventually(c.t, stateTimeout, "a heartbeat through a surviving server", func() bool {
		node, err := c.api.Nodes.Get(c.ctx, &apiv1.GetNodeRequest{Name: n.Name})
		return err == nil && node.GetStatus().GetHeartbeat().AsTime().After(t0)
	})
}

// reLeaseRanOut is the node agent's log line of a failed heartbeat after
// its lease ended.
var reLeaseRanOut = regexp.MustCompile(`msg="heartbeat failed".*lease_left=-`)

// waitLeaseRanOut waits until n's node agent logs a heartbeat failing
// after its node lease ran out, later than t0.
func (c *mnCluster) waitLeaseRanOut(n *mnNode, t0 time.Time) {
	c.t.Helper()
	testutil.Eventually(c.t, stateTimeout, "the node lease to run out", func() bool {
		b, err := os.ReadFile(n.Agent.Log)
		if err != nil {
			return false
		}
		for _, line := range strings.Split(string(b), "\n") {
			if reLeaseRanOut.MatchString(line) && logTime(line).After(t0) {
				return true
			}
		}
		return false
	})
}

var reLogTime = regexp.MustCompile(`^time=(\S+)`)

// logTime is the time of a slog text line; zero when it has none.
func logTime(line string) time.Time {
	m := reLogTime.FindStringSubmatch(line)
	if m == nil {
		return time.Time{}
	}
	ts, _ := time.Parse(time.RFC3339Nano, m[1])
	return ts
}

// terraformApply creates VM "tf" on n with the real terraform CLI and the
// provider in providerDir, pointed at endpoints.
func (c *mnCluster) terraformApply(providerDir string, endpoints []string, n *mnNode) {
	c.t.Helper()
	tf, err := bench.NewTerraform(filepath.Join(c.t.TempDir(), "tf"), providerDir)
	if err != nil {
		c.t.Fatal(err)
	}
	p := pki.PathsIn(filepath.Join(c.Servers[0].DataDir, "pki"))
	var quoted []string
	for _, e := range endpoints {
		quoted = append(quoted, fmt.Sprintf("%q", e))
	}
	hcl := fmt.Sprintf(`terraform {
  required_providers {
    virtplane = { source = "virtplane/virtplane" }
  }
}

provider "virtplane" {
  endpoints  = [%s]
  token_file = %q
  ca_file    = %q
}

resource "virtplane_virtual_machine" "tf" {
  name          = "tf"
  namespace     = %q
  memory        = %q
  node_selector = { %q = %q }
  boot {
    kernel  = %q
    initrd  = %q
    cmdline = %q
  }
}
`, strings.Join(quoted, ", "), p.Token, p.CACert, c.ns, guestMemory, apiv1.LabelNodeName, n.Name,
		n.Kernel, testguest.InitrdFile, testguest.Cmdline())
	if err := tf.WriteConfig(hcl); err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(c.ctx, 5*time.Minute)
	defer cancel()
	took, out, err := tf.Run(ctx, "apply", "-auto-approve", "-no-color")
	if err != nil {
		c.t.Fatalf("terraform apply through %v: %v", endpoints, err)
	}
	if !strings.Contains(out, "Apply complete!") {
		c.t.Fatalf("terraform apply: no 'Apply complete!':\n%s", out)
	}
	report(c.t, "terraform apply through %d endpoints, the first one down: VM running in %s", len(endpoints), took.Round(time.Millisecond))
}
