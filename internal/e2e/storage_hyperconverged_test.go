package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/guestnet"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	cephtest "github.com/virtplane/terraform-provider-virtplane/internal/testutil/ceph"
)

// TestHyperconvergedHost is issue 34's hyperconverged host, both sides:
// a Ceph cluster's monitor and OSD listen on the node's own address, in
// the network namespace its libvirtd and QEMUs run in, where the node
// agent keeps its guest firewall (which refuses QEMU's user every
// connection to the host's own addresses). The node agent lets exactly
// the cluster's public endpoints through, so a guest boots with its
// volume on that cluster and writes a boot counter to it; and the same
// guest, through its user-mode network, is refused at a host listener on
// the node's address, at one on the Ceph address inside the OSDs' port
// range, and at the node's loopback by 127.0.0.1 and by the gateway
// 10.0.2.2.
//
// The server runs in the host's namespace, which has no route to the
// node's address: it cannot reach this cluster (the class's Ready stays
// False), and needs not: placement follows what the node reports, and
// everything here is the node's work.
func TestHyperconvergedHost(t *testing.T) {
	t.Parallel()
	cephtest.Require(t)
	c := newMultiNodeCluster(t, mnOptions{nodes: 1})
	t.Cleanup(c.dumpOnFailure)
	n := c.nodes[0]
	id := randomID(t)
	ctx, cancel := context.WithTimeout(c.ctx, cephtest.StartTimeout)
	cl, err := cephtest.Start(ctx, cephtest.Options{Dir: filepath.Join(n.Root, "ceph"), NetNS: n.NetNS, Addr: n.Addr, Log: t})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cl.Close(); err != nil {
			t.Error(err)
		}
	})
	key, err := cl.CreateUser(c.ctx, "hci", "mon", "profile rbd", "osd", "profile rbd pool="+cl.Pool())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.api.StorageClasses.Create(c.ctx, &apiv1.CreateStorageClassRequest{StorageClass: &apiv1.StorageClass{
		Metadata: &apiv1.ObjectMeta{Name: "local-ceph"},
		Spec: &apiv1.StorageClassSpec{Rbd: &apiv1.RBDStorage{
			Monitors: cl.Monitors(), Pool: cl.Pool(), User: "hci", Key: strings.TrimSpace(key),
		}},
	}}); err != nil {
		t.Fatal(err)
	}
	c.waitNodesReach("local-ceph")

	// The node's firewall lets through the mon's v2 and v1 addresses and
	// the OSD's public ones, which the node agent read with the class's
	// user, and no other address of the cluster.
	want := publicEndpoints(t, cl)
	testutil.EventuallyNoError(t, stateTimeout, "the storage endpoints in the node's guest firewall", func() error {
		got, err := firewallEndpoints(n.NetNS)
		if err != nil {
			return err
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("the node's firewall lets through %v, want %v", got, want)
		}
		return nil
	})

	// Services of the host, in the node's namespace.
	local := serveToken(t, listenIn(t, n.NetNS, "tcp4", net.JoinHostPort(n.Addr, "0")), "local-"+id)
	osdRange := serveToken(t, listenIn(t, n.NetNS, "tcp4", net.JoinHostPort(n.Addr, "7000")), "osdrange-"+id)
	loop := serveToken(t, listenIn(t, n.NetNS, "tcp4", "127.0.0.1:0"), "loopback-"+id)
	gw, direct := "10.0.2.2:"+loop.port, "127.0.0.1:"+loop.port
	mon := cl.Monitors()[0]
	// Loopback last: the guest reroutes 127.0.0.0/8 for it.
	targets := []string{mon, local.addr, osdRange.addr, gw, direct}
	mustNotReach := map[string]*tokenServer{local.addr: local, osdRange.addr: osdRange, gw: loop, direct: loop}

	vm := guestVM(c.ns, "hci", apiv1.RunStrategyOnce, n.Kernel,
		testguest.Cmdline(testguest.Persist("/dev/vda"), testguest.NetProbe(targets...)))
	vm.Spec.Template.Spec.NodeSelector = map[string]string{apiv1.LabelNodeName: n.Name}
	withDisks(vm, []*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}},
		[]*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "64Mi", StorageClass: "local-ceph"}}})
	spec := vm.Spec.Template.Spec
	spec.Networks = []*apiv1.Network{{Name: "default", User: &apiv1.UserNetwork{}}}
	spec.Domain.Devices.Interfaces = []*apiv1.Interface{{Name: "default"}}
	began := time.Now()
	if _, err := c.api.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
		t.Fatal(err)
	}
	vmi := c.waitRunning("hci")
	running := time.Since(began)
	con := n.console(t, vmi.GetMetadata().GetUid())
	wrote := testguest.Fields(con.waitMarker(testguest.MarkerPersistWrote, bootTimeout))
	if wrote["boot"] != "1" {
		t.Fatalf("the guest wrote %v to its volume on the local cluster, want boot=1", wrote)
	}
	t.Logf("create → Running %s, → boot counter written to the local cluster %s", running.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	image := rbdImageOf(c.vm("hci"), "data")
	if out, err := cl.Admin(c.ctx, "rbd", "status", cl.Pool()+"/"+image, "--format", "json"); err != nil || !strings.Contains(string(out), n.Addr+":0/") {
		t.Errorf("the volume's watchers: %s, %v; want QEMU's, from %s", out, err, n.Addr)
	}

	con.waitMarker(testguest.MarkerNetProbeDone, 2*time.Minute)
	probes, _ := testguest.NetProbes(con.text())
	t.Logf("probes: %v", probes)
	assertRefused(t, probes, mustNotReach, local, osdRange, loop)
	// The exception: the guest's connection to the monitor is let
	// through (the monitor speaks msgr2, not HTTP), as it would be to a
	// monitor on any other host.
	if p := probes[mon]; p.Target == "" || strings.Contains(p.Error, "refused") {
		t.Errorf("probe of the monitor %s: %+v, want a connection", mon, p)
	}

	// Stopped before the cluster goes (cleanups run after).
	if _, err := c.api.VMs.Stop(c.ctx, &apiv1.StopVirtualMachineRequest{Key: c.key("hci")}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, stateTimeout, "the VM stopped", func() bool {
		return c.vm("hci").GetStatus().GetPrintableStatus() == apiv1.PrintableStopped
	})
}

// publicEndpoints are the cluster's monitors' and OSDs' public
// addresses, as the admin reads them.
func publicEndpoints(t *testing.T, cl *cephtest.Cluster) []netip.AddrPort {
	t.Helper()
	type vec struct {
		Addrvec []struct{ Addr string } `json:"addrvec"`
	}
	var out []netip.AddrPort
	for _, m := range []struct{ cmd, list string }{{"mon", "mons"}, {"osd", "osds"}} {
		b, err := cl.Admin(context.Background(), "ceph", m.cmd, "dump", "--format", "json")
		if err != nil {
			t.Fatal(err)
		}
		var dump map[string]json.RawMessage
		if err := json.Unmarshal(b, &dump); err != nil {
			t.Fatal(err)
		}
		var entities []struct {
			Public vec `json:"public_addrs"`
		}
		if err := json.Unmarshal(dump[m.list], &entities); err != nil {
			t.Fatal(err)
		}
		for _, e := range entities {
			for _, a := range e.Public.Addrvec {
				out = append(out, netip.MustParseAddrPort(a.Addr))
			}
		}
	}
	slices.SortFunc(out, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return slices.Compact(out)
}

// firewallEndpoints lists the storage endpoints of the guest firewall in
// network namespace netns (its sets storage4 and storage6, package
// guestnet).
func firewallEndpoints(netns string) ([]netip.AddrPort, error) {
	var out []netip.AddrPort
	for _, set := range []string{"storage4", "storage6"} {
		cmd := exec.Command("ip", "netns", "exec", netns, "nft", "-j", "list", "set", "inet", guestnet.Table, set)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		b, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("nft list set %s in %s: %w: %s", set, netns, err, stderr.Bytes())
		}
		var doc struct {
			Nftables []struct {
				Set *struct {
					Elem []struct {
						Concat []any `json:"concat"`
					} `json:"elem"`
				} `json:"set"`
			} `json:"nftables"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, err
		}
		for _, e := range doc.Nftables {
			if e.Set == nil {
				continue
			}
			for _, el := range e.Set.Elem {
				if len(el.Concat) != 2 {
					return nil, fmt.Errorf("set %s: element %v", set, el)
				}
				ap, err := netip.ParseAddrPort(net.JoinHostPort(fmt.Sprint(el.Concat[0]), fmt.Sprint(el.Concat[1])))
				if err != nil {
					return nil, fmt.Errorf("set %s: element %v: %w", set, el, err)
				}
				out = append(out, ap)
			}
		}
	}
	slices.SortFunc(out, func(a, b netip.AddrPort) int { return a.Compare(b) })
	return out, nil
}
