package ceph_test

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/multinode"
)

// sharedCeph is the package's shared cluster (TestSharedCluster), as a
// storage-tier test package keeps one.
var sharedCeph ceph.Shared

func TestMain(m *testing.M) {
	os.Exit(sharedCeph.CloseAfter(m.Run()))
}

// The multinode tests run private libvirtds: they belong to the libvirt
// tier, like internal/testutil/multinode's own.
const envLibvirtURI = "VIRTPLANE_TEST_LIBVIRT_URI"

func requireLibvirtTier(t *testing.T) {
	t.Helper()
	if os.Getenv(envLibvirtURI) == "" {
		t.Skipf("%s is not set; the multinode tests run private libvirtds in the libvirt tier", envLibvirtURI)
	}
}

// reach checks that a cluster answers, as client.vp with a key file and
// the monitors only (what the server and the node agents will do), from
// the host's network namespace (hostNS "") or from node namespace ns.
func reach(t *testing.T, c *ceph.Cluster, keyfile, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	auth := []string{"-m", c.Monitors()[0], "--id", "vp", "--keyfile", keyfile}
	for _, cmd := range [][]string{
		append([]string{"ceph", "-c", "/dev/null"}, append(auth, "-s")...),
		append([]string{"rbd"}, append(auth, "create", c.Pool()+"/from-"+strings.ReplaceAll(ns+"host", "-", ""), "--size", "8M")...),
	} {
		if ns != "" {
			cmd = append([]string{"nsenter", "--net=/run/netns/" + ns, "--"}, cmd...)
		}
		began := time.Now()
		out, err := exec.CommandContext(ctx, cmd[0], cmd[1:]...).CombinedOutput()
		if err != nil {
			t.Errorf("%s: %v\n%s", strings.Join(cmd, " "), err, out)
			continue
		}
		t.Logf("%s: %s", strings.Join(cmd, " "), time.Since(began).Round(time.Millisecond))
	}
}

// TestClusterInRunHub: a cluster in the hub of a one-node run with a host
// link answers from the host's namespace (the server's) and from the
// node's (its libvirtd's, where the node agent runs its CLIs); with the
// run closed, no daemon, no host interface and no dir is left.
func TestClusterInRunHub(t *testing.T) {
	requireLibvirtTier(t)
	ceph.Require(t)
	t.Parallel()
	var (
		hub        multinode.Hub
		mon, osd   int
		clusterDir string
	)
	t.Run("run", func(t *testing.T) {
		n := multinode.Start(t, 1, multinode.Options{HostLink: true})[0]
		hub = n.Hub()
		if n.HubAddr != hub.Addr || hub.HostAddr == "" || !strings.HasSuffix(hub.Addr, ".254") || !strings.HasSuffix(hub.HostAddr, ".250") {
			t.Fatalf("hub %+v, node's hub address %s", hub, n.HubAddr)
		}
		c := ceph.StartForTest(t, hub)
		mon, osd = c.Pids()
		clusterDir = hub.Dir + "/ceph"
		keyfile := userKeyFile(t, c, "vp", "mon", "profile rbd", "osd", "profile rbd pool="+c.Pool())
		reach(t, c, keyfile, "")
		reach(t, c, keyfile, n.NetNS)
		qemuOpens(t, c, "from-host")
	})
	for _, pid := range []int{mon, osd} {
		if procfs.Alive(pid) {
			t.Errorf("daemon %d (%s) still runs", pid, procfs.Comm(pid))
		}
	}
	if _, err := os.Stat(clusterDir); !os.IsNotExist(err) {
		t.Errorf("%s still exists (%v)", clusterDir, err)
	}
	assertNoHostAddr(t, hub.HostAddr)
}

// assertNoHostAddr checks that no interface of the host's namespace has
// addr any more.
func assertNoHostAddr(t *testing.T, addr string) {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if strings.HasPrefix(a.String(), addr+"/") {
			t.Errorf("the host's namespace still has %s", a)
		}
	}
}

// TestSharedCluster: the package's shared cluster lives in a hub of its
// own that a run joins; the host's namespace and the joined node reach
// it, and a second Get is the same cluster.
func TestSharedCluster(t *testing.T) {
	requireLibvirtTier(t)
	t.Parallel()
	c, run := sharedCeph.Get(t)
	hub := run.Hub()
	if run.Nodes() != nil || hub.HostAddr == "" || c.NetNS() != hub.NetNS {
		t.Fatalf("shared run: %d nodes, hub %+v, cluster in %s", len(run.Nodes()), hub, c.NetNS())
	}
	n := multinode.Start(t, 1, multinode.Options{Hub: run})[0]
	if n.HubNetNS != hub.NetNS || n.HubAddr != hub.Addr || !strings.HasPrefix(n.Addr, strings.TrimSuffix(hub.Addr, "254")) {
		t.Errorf("the joined node: hub %s at %s, address %s; want the shared hub %+v", n.HubNetNS, n.HubAddr, n.Addr, hub)
	}
	keyfile := userKeyFile(t, c, "vp", "mon", "profile rbd", "osd", "profile rbd pool="+c.Pool())
	reach(t, c, keyfile, "")
	reach(t, c, keyfile, n.NetNS)
	if again, _ := sharedCeph.Get(t); again != c {
		t.Error("a second Get started another cluster")
	}
}

// qemuUser is who the system libvirtd runs QEMU as on Debian.
const qemuUser = "libvirt-qemu"

// qemuOpens checks that QEMU's user, in the host's namespace, opens image
// of c's pool through QEMU's rbd driver as libvirt has QEMU do it (server,
// user and a key secret; no conf): the host link carries QEMU's traffic
// past the guest firewall (when a node agent has loaded it in the host's
// namespace, it rejects QEMU's connections to local addresses, and the
// hub's address is not one), and the block module the gate checks for
// works.
func qemuOpens(t *testing.T, c *ceph.Cluster, image string) {
	t.Helper()
	u, err := user.Lookup(qemuUser)
	if err != nil {
		t.Skipf("%s: %v", qemuUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	// t.TempDir's parents are 0700: QEMU's user could not reach a key
	// there.
	dir, err := os.MkdirTemp("", "vpceph-qemu-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	key, err := c.CreateUser(t.Context(), "vp")
	if err != nil {
		t.Fatal(err)
	}
	keyfile := filepath.Join(dir, "vp.key")
	if err := os.WriteFile(keyfile, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(keyfile, uid, gid); err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(c.Monitors()[0])
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	began := time.Now()
	out, err := exec.CommandContext(ctx, "runuser", "-u", qemuUser, "--", "qemu-img", "info", "--output=json",
		"--object", "secret,id=sec0,file="+keyfile+",format=base64", "--image-opts",
		"driver=raw,file.driver=rbd,file.pool="+c.Pool()+",file.image="+image+
			",file.server.0.host="+host+",file.server.0.port="+port+",file.user=vp,file.key-secret=sec0").CombinedOutput()
	if err != nil {
		t.Fatalf("qemu-img info as %s: %v\n%s", qemuUser, err, out)
	}
	var info struct {
		Size int64 `json:"virtual-size"`
	}
	if err := json.Unmarshal(out, &info); err != nil || info.Size != 8<<20 {
		t.Errorf("qemu-img info as %s: size %d (%v), want 8 MiB\n%s", qemuUser, info.Size, err, out)
	}
	t.Logf("qemu-img info as %s over rbd: %s", qemuUser, time.Since(began).Round(time.Millisecond))
}
