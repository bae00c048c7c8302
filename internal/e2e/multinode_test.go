package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/multinode"
)

// TestMultiNodeBoots: two nodes, each a node agent on a private libvirt
// host, joined over TLS with bootstrap tokens; one VM pinned to each by
// the node-name label. Each guest boots on its own node's libvirtd (its
// domain there, its QEMU in that node's network namespace) and on no
// other (not the other node's, not qemu:///system). Deleting the VMs
// removes both domains; the cleanup then leaves no namespace, process or
// directory behind.
func TestMultiNodeBoots(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	var (
		pids    []int    // every process of the cluster
		paths   []string // every namespace file and dir of the cluster
		bodyEnd time.Time
	)
	t.Run("cluster", func(t *testing.T) {
		c := newMultiNodeCluster(t, mnOptions{})
		created := time.Now()
		names := map[*mnNode]string{}
		for i, n := range c.nodes {
			names[n] = fmt.Sprintf("vm%d", i)
			vm := c.guestVM(names[n], n, testguest.Cmdline(testguest.Hostname("vp-mn-"+names[n])))
			if _, err := c.api.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
				t.Fatalf("creating VM %s: %v", names[n], err)
			}
		}
		// Both guests boot at once; each one's time is when its marker
		// was first seen.
		cons := map[*mnNode]*console{}
		for _, n := range c.nodes {
			vmi := c.waitRunning(names[n])
			if got := vmi.GetStatus().GetNodeName(); got != n.Name {
				t.Fatalf("VM %s runs on node %q, pinned to %s", names[n], got, n.Name)
			}
			cons[n] = n.console(t, vmi.GetMetadata().GetUid())
		}
		booted := map[*mnNode]time.Duration{}
		testutil.Eventually(t, bootTimeout, "both guests' boot markers", func() bool {
			for _, n := range c.nodes {
				if _, ok := booted[n]; !ok {
					if _, ok := testguest.FindMarker(cons[n].text(), testguest.MarkerBooted); ok {
						booted[n] = time.Since(created)
					}
				}
			}
			return len(booted) == len(c.nodes)
		})
		for _, n := range c.nodes {
			line, _ := testguest.FindMarker(cons[n].text(), testguest.MarkerBooted)
			f := testguest.Fields(line)
			if f["hostname"] != "vp-mn-"+names[n] {
				t.Errorf("node %s's console shows guest %q, want vp-mn-%s", n.Name, f["hostname"], names[n])
			}
			report(t, "multinode: guest %s booted on node %s %s after create (guest uptime %ss)",
				names[n], n.Name, booted[n].Round(time.Millisecond), f["uptime"])
		}

		for _, n := range c.nodes {
			dom := c.domain(names[n])
			if st, err := n.DomainState(c.ctx, dom); err != nil || st != "running" {
				t.Errorf("domain %s on node %s: %q (%v), want running", dom, n.Name, st, err)
			}
			qemu := n.QEMUPid(dom)
			if in, err := n.Runs(qemu); qemu == 0 || err != nil || !in {
				t.Errorf("QEMU %d of %s does not run in node %s's network namespace (%v)", qemu, dom, n.Name, err)
			}
			// The launcher reports that same QEMU (read from the node's
			// pid dir, --qemu-pid-dir), not 0 from the system libvirtd's.
			reported := c.reportedQEMUPid(n, names[n])
			if reported != qemu || !strings.HasPrefix(procfs.Comm(reported), "qemu") {
				t.Errorf("node %s's launcher reports QEMU pid %d (%q) for %s, want %d", n.Name, reported, procfs.Comm(reported), dom, qemu)
			}
			if in, err := n.Runs(reported); err != nil || !in {
				t.Errorf("reported QEMU %d of %s does not run in node %s's network namespace (%v)", reported, dom, n.Name, err)
			}
			for _, other := range c.nodes {
				if other == n {
					continue
				}
				if ok, err := other.HasDomain(c.ctx, dom); err != nil || ok {
					t.Errorf("domain %s is on node %s too (%v)", dom, other.Name, err)
				}
			}
			if ds := domainsOnSystem(t, c.ns+"_"); len(ds) > 0 {
				t.Errorf("%s has this test's domains %v", env.uri, ds)
			}
			pids = append(pids, qemu)
		}

		// Two node agents on one machine coexist: neither has stopped
		// (on the guest firewall both install, say).
		for _, n := range c.nodes {
			if !n.Agent.Alive() {
				t.Errorf("node agent %s exited: %s", n.Name, multinode.TailFile(n.Agent.Log, 4000))
			}
			for _, line := range logMatches(n.Agent.Log, reGuestFirewall) {
				t.Logf("node %s: %s", n.Name, line)
			}
		}

		// Everything that must be gone after the cleanup.
		pids = append(pids, c.Servers[0].Proc.Pid())
		paths = append(paths, c.Dir)
		for _, n := range c.nodes {
			pids = append(pids, n.Agent.Pid())
			pids = append(pids, n.Pids()...)
			paths = append(paths, n.Root, filepath.Join("/run/netns", n.NetNS))
		}
		pids = append(pids, procfs.LauncherPidsWithPrefix(env.launcher, c.ns+"_")...)

		deleted := time.Now()
		for _, n := range c.nodes {
			if _, err := c.api.VMs.Delete(c.ctx, &apiv1.DeleteVirtualMachineRequest{Key: c.key(names[n])}); err != nil {
				t.Fatalf("deleting VM %s: %v", names[n], err)
			}
		}
		for _, n := range c.nodes {
			name, dom := names[n], c.domain(names[n])
			testutil.Eventually(t, stateTimeout, "VM "+name+" gone", func() bool {
				_, err := c.api.VMs.Get(c.ctx, &apiv1.GetVirtualMachineRequest{Key: c.key(name)})
				return status.Code(err) == codes.NotFound
			})
			testutil.Every(200*time.Millisecond).Eventually(t, stateTimeout, "domain "+dom+" gone from "+n.Name, func() bool {
				ds, err := n.Domains(c.ctx)
				return err == nil && !slices.Contains(ds, dom)
			})
		}
		report(t, "multinode: both VMs deleted and their domains gone in %s", time.Since(deleted).Round(time.Millisecond))
		bodyEnd = time.Now()
	})
	if len(pids) == 0 {
		return // the cluster did not come up; the subtest said why
	}
	report(t, "multinode: teardown of the server, 2 node agents and 2 libvirt hosts in %s", time.Since(bodyEnd).Round(time.Millisecond))
	for _, pid := range pids {
		if procfs.Alive(pid) {
			t.Errorf("process %d (%s) of the cluster still runs after its cleanup", pid, procfs.Comm(pid))
		}
	}
	for _, p := range paths {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still exists after the cleanup (%v)", p, err)
		}
	}
}

var reGuestFirewall = regexp.MustCompile(`guest firewall`)

// reportedQEMUPid is the QEMU pid the launcher of VM name's instance on
// node n reported at its first Sync (the node agent's "domain synced"
// log line); it fails the test if the line never shows.
func (c *mnCluster) reportedQEMUPid(n *mnNode, name string) int {
	c.t.Helper()
	re := regexp.MustCompile(`msg="domain synced" .*\bvmi=` + regexp.QuoteMeta(c.ns+"/"+name) + ` .*\bqemu_pid=([0-9]+)`)
	var pid int
	testutil.EventuallyNoError(c.t, stateTimeout, "node "+n.Name+"'s domain synced line for "+name, func() error {
		lines := logMatches(n.Agent.Log, re)
		if len(lines) == 0 {
			return fmt.Errorf("no match for %s in %s", re, n.Agent.Log)
		}
		var err error
		pid, err = strconv.Atoi(re.FindStringSubmatch(lines[len(lines)-1])[1])
		return err
	})
	return pid
}
