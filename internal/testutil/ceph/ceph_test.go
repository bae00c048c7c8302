package ceph_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/ceph"
)

// newNetNS makes a network namespace with a bridge holding a link-local
// address, as a multinode hub has, and deletes it when t ends.
func newNetNS(t *testing.T) (ns, addr string) {
	t.Helper()
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	ns = "vpceph-test-" + hex.EncodeToString(b)
	addr = fmt.Sprintf("169.254.%d.254", 1+int(b[0])%254)
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() {
		if err := exec.Command("ip", "netns", "delete", ns).Run(); err != nil {
			t.Errorf("deleting network namespace %s: %v", ns, err)
		}
	})
	for _, args := range [][]string{
		{"-n", ns, "link", "set", "lo", "up"},
		{"-n", ns, "link", "add", "br0", "type", "bridge"},
		{"-n", ns, "addr", "add", addr + "/24", "dev", "br0"},
		{"-n", ns, "link", "set", "br0", "up"},
	} {
		run(t, "ip", args...)
	}
	return ns, addr
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v: %s", name, strings.Join(args, " "), err, out)
	}
}

// rbdInfo is what the tests read of `rbd info --format json`.
type rbdInfo struct {
	Size     int64    `json:"size"`
	Features []string `json:"features"`
	Parent   *struct {
		Pool     string `json:"pool"`
		Image    string `json:"image"`
		Snapshot string `json:"snapshot"`
	} `json:"parent"`
}

func info(t *testing.T, c *ceph.Cluster, image string) rbdInfo {
	t.Helper()
	out, err := c.Admin(t.Context(), "rbd", "info", "--format", "json", image)
	if err != nil {
		t.Fatal(err)
	}
	var i rbdInfo
	if err := json.Unmarshal(out, &i); err != nil {
		t.Fatalf("rbd info %s: %v: %s", image, err, out)
	}
	return i
}

// TestClusterLifecycle: a cluster in a namespace of the test's own, with
// its daemons there and nothing listening on a wildcard address; the RBD
// work virtplane does (create, import, snapshot, protect, clone, resize,
// export) as admin; a restricted user as the server and the node agents
// will have (profile rbd), which works in its pool and not in another, and
// may blocklist a whole node (ip:0/0) but not lift it, which takes one
// more cap; Close leaves no process, no dir, and is idempotent.
func TestClusterLifecycle(t *testing.T) {
	ceph.Require(t)
	t.Parallel()
	ctx := t.Context()
	ns, addr := newNetNS(t)
	dir := filepath.Join(t.TempDir(), "ceph")
	began := time.Now()
	c, err := ceph.Start(ctx, ceph.Options{Dir: dir, NetNS: ns, Addr: addr, Log: t})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("start: %s", time.Since(began).Round(time.Millisecond))
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = c.Close()
		}
	})
	mon := c.Monitors()[0]
	if want := addr + ":3300"; mon != want || c.Pool() != "vp" {
		t.Errorf("monitors %v, pool %q: want [%s], vp", c.Monitors(), c.Pool(), want)
	}
	monPid, osdPid := c.Pids()
	logRSS(t, "after the start", monPid, osdPid)
	for _, pid := range []int{monPid, osdPid} {
		if !inNetNS(t, pid, ns) {
			t.Errorf("daemon %d (%s) is not in network namespace %s", pid, procfs.Comm(pid), ns)
		}
	}
	// cluster addr: the OSD binds its cluster and heartbeat ports on
	// Addr, not on 0.0.0.0.
	if wild := wildcardListeners(t, osdPid); len(wild) > 0 {
		t.Errorf("listening on the wildcard address in %s: %v", ns, wild)
	}

	t.Run("admin", func(t *testing.T) {
		ctx := t.Context()
		raw := filepath.Join(t.TempDir(), "disk.raw")
		data := bytes.Repeat([]byte("virtplane"), (4<<20)/9+1)[:4<<20]
		if err := os.WriteFile(raw, data, 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"create", "vp/empty", "--size", "1G"},
			{"import", raw, "vp/base"},
			{"snap", "create", "vp/base@gold"},
			{"snap", "protect", "vp/base@gold"},
			{"clone", "vp/base@gold", "vp/vm1"},
			{"resize", "vp/vm1", "--size", "64M"},
		} {
			began := time.Now()
			if _, err := c.Admin(ctx, "rbd", args...); err != nil {
				t.Fatal(err)
			}
			t.Logf("rbd %s: %s", strings.Join(args, " "), time.Since(began).Round(time.Millisecond))
		}
		if i := info(t, c, "vp/empty"); i.Size != 1<<30 || !slices.Contains(i.Features, "exclusive-lock") {
			t.Errorf("vp/empty: size %d, features %v: want 1 GiB with exclusive-lock", i.Size, i.Features)
		}
		i := info(t, c, "vp/vm1")
		if i.Size != 64<<20 || i.Parent == nil || i.Parent.Image != "base" || i.Parent.Snapshot != "gold" {
			t.Errorf("vp/vm1: %+v: want 64 MiB, a clone of vp/base@gold", i)
		}
		// The clone reads the parent's data.
		out := filepath.Join(t.TempDir(), "vm1.raw")
		if _, err := c.Admin(ctx, "rbd", "export", "vp/vm1", out); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 64<<20 || !bytes.Equal(got[:len(data)], data) || bytes.ContainsFunc(got[len(data):], func(r rune) bool { return r != 0 }) {
			t.Errorf("vp/vm1 exported %d bytes: want the imported 4 MiB, then zeros to 64 MiB", len(got))
		}
	})

	t.Run("restricted user", func(t *testing.T) {
		ctx := t.Context()
		keyfile := userKeyFile(t, c, "vp", "mon", "profile rbd", "osd", "profile rbd pool=vp")
		// As the server and node agents will run it: no conf, the
		// monitors and a key file.
		as := func(bin string, args ...string) error {
			pre := []string{"-m", mon, "--id", "vp", "--keyfile", keyfile}
			if bin == "ceph" {
				// The ceph CLI refuses to start without a conf file.
				pre = append([]string{"-c", "/dev/null"}, pre...)
			}
			_, err := c.Exec(ctx, bin, append(pre, args...)...)
			return err
		}
		for _, args := range [][]string{
			{"create", "vp/u1", "--size", "16M"},
			{"snap", "create", "vp/u1@s"},
			{"snap", "protect", "vp/u1@s"},
			{"clone", "vp/u1@s", "vp/u2"},
			{"resize", "vp/u2", "--size", "32M"},
			{"rm", "vp/u2"},
		} {
			if err := as("rbd", args...); err != nil {
				t.Errorf("as client.vp: %v", err)
			}
		}
		if err := c.CreatePool(ctx, "other"); err != nil {
			t.Fatal(err)
		}
		if err := as("rbd", "create", "other/x", "--size", "16M"); err == nil {
			t.Error("client.vp (osd profile rbd pool=vp) created an image in pool other")
		}

		// Fencing a node: profile rbd lets the user blocklist a whole
		// address with nonce 0 (the mon's cap takes addresses matching
		// ^[^/]+/[0-9]+$), not a bare one, and never lift an entry.
		node := strings.TrimSuffix(addr, ".254") + ".2"
		if err := as("ceph", "osd", "blocklist", "add", node+":0/0"); err != nil {
			t.Errorf("client.vp blocklisting %s:0/0: %v", node, err)
		}
		if bl, err := c.Blocklist(ctx); err != nil || !slices.Contains(bl, node+":0/0") {
			t.Errorf("blocklist %v (%v): want %s:0/0", bl, err, node)
		}
		if err := as("ceph", "osd", "blocklist", "add", node); err == nil || !strings.Contains(err.Error(), "EACCES") {
			t.Errorf("client.vp blocklisting bare %s: %v, want EACCES", node, err)
		}
		if err := as("ceph", "osd", "blocklist", "rm", node+":0/0"); err == nil || !strings.Contains(err.Error(), "EACCES") {
			t.Errorf("client.vp lifting %s:0/0: %v, want EACCES (profile rbd may only add)", node, err)
		}
		// The smallest cap that also lifts it.
		fence := userKeyFile(t, c, "vpfence", "mon", `profile rbd, allow command "osd blocklist" with blocklistop=rm`, "osd", "profile rbd pool=vp")
		if _, err := c.Exec(ctx, "ceph", "-c", "/dev/null", "-m", mon, "--id", "vpfence", "--keyfile", fence, "osd", "blocklist", "rm", node+":0/0"); err != nil {
			t.Errorf("client.vpfence lifting %s:0/0: %v", node, err)
		}
		if bl, err := c.Blocklist(ctx); err != nil || len(bl) != 0 {
			t.Errorf("blocklist %v (%v): want it empty", bl, err)
		}
	})

	logRSS(t, "after the tests", monPid, osdPid)
	began = time.Now()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	closed = true
	t.Logf("close: %s", time.Since(began).Round(time.Millisecond))
	assertClosed(t, c, dir, monPid, osdPid)
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.Admin(ctx, "ceph", "-s"); err == nil {
		t.Error("Admin after Close succeeded")
	}
}

// userKeyFile makes client.name with caps and writes its key to a 0600
// file, as the server hands keys to its CLIs.
func userKeyFile(t *testing.T, c *ceph.Cluster, name string, caps ...string) string {
	t.Helper()
	key, err := c.CreateUser(t.Context(), name, caps...)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), name+".key")
	if err := os.WriteFile(f, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// assertClosed checks that no process uses the cluster and its dir is
// gone.
func assertClosed(t *testing.T, c *ceph.Cluster, dir string, pids ...int) {
	t.Helper()
	for _, pid := range pids {
		if procfs.Alive(pid) {
			t.Errorf("daemon %d (%s) still runs after Close", pid, procfs.Comm(pid))
		}
	}
	if left := ceph.PidsUsing(c.Conf()); len(left) > 0 {
		t.Errorf("processes %v still use %s", left, c.Conf())
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists (%v)", dir, err)
	}
}

// inNetNS reports whether pid runs in network namespace ns.
func inNetNS(t *testing.T, pid int, ns string) bool {
	t.Helper()
	var a, b syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &a); err != nil {
		t.Error(err)
		return false
	}
	if err := syscall.Stat(filepath.Join("/run/netns", ns), &b); err != nil {
		t.Error(err)
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

// wildcardListeners are the TCP sockets listening on 0.0.0.0 in pid's
// network namespace (/proc/PID/net/tcp: local address 00000000:port,
// state 0A).
func wildcardListeners(t *testing.T, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/tcp", pid))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[3] == "0A" && strings.HasPrefix(f[1], "00000000:") {
			out = append(out, f[1])
		}
	}
	return out
}

// TestStartRefusesBadOptions: each bad option is refused before anything
// is made, naming the option.
func TestStartRefusesBadOptions(t *testing.T) {
	base := t.TempDir()
	good := ceph.Options{Dir: filepath.Join(base, "c"), NetNS: "ns1", Addr: "169.254.9.254"}
	for _, tc := range []struct {
		name   string
		change func(*ceph.Options)
		want   string
	}{
		{"no dir", func(o *ceph.Options) { o.Dir = "" }, "Options.Dir"},
		{"relative dir", func(o *ceph.Options) { o.Dir = "ceph" }, "Options.Dir"},
		{"dir with a space", func(o *ceph.Options) { o.Dir = base + "/a b" }, "Options.Dir"},
		{"dir with a $", func(o *ceph.Options) { o.Dir = base + "/$cluster" }, "Options.Dir"},
		{"unclean dir", func(o *ceph.Options) { o.Dir = base + "/x/../c" }, "Options.Dir"},
		{"no netns", func(o *ceph.Options) { o.NetNS = "" }, "Options.NetNS"},
		{"netns path", func(o *ceph.Options) { o.NetNS = "../x" }, "Options.NetNS"},
		{"no addr", func(o *ceph.Options) { o.Addr = "" }, "Options.Addr"},
		{"IPv6 addr", func(o *ceph.Options) { o.Addr = "fe80::1" }, "Options.Addr"},
		{"host name", func(o *ceph.Options) { o.Addr = "mon.example" }, "Options.Addr"},
		{"pool like an option", func(o *ceph.Options) { o.Pool = "--yes-i-really-mean-it" }, "Options.Pool"},
		{"small block", func(o *ceph.Options) { o.BlockSize = 1 << 20 }, "Options.BlockSize"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good
			tc.change(&o)
			_, err := ceph.Start(t.Context(), o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
			if _, err := os.Stat(o.Dir); o.Dir != "" && filepath.IsAbs(o.Dir) && !os.IsNotExist(err) {
				t.Errorf("%s was made (%v)", o.Dir, err)
			}
		})
	}
}

// TestStartFailureCleansUp: an address that is not in the namespace is
// refused at once (a mon would retry binding for 10 s); a start that fails
// once the mon runs (the OSD's block file cannot be that large) returns
// the daemons' logs and leaves no process and no dir.
func TestStartFailureCleansUp(t *testing.T) {
	ceph.Require(t)
	t.Parallel()
	ns, addr := newNetNS(t)
	dir := filepath.Join(t.TempDir(), "ceph")

	other := strings.TrimSuffix(addr, ".254") + ".7"
	_, err := ceph.Start(t.Context(), ceph.Options{Dir: dir, NetNS: ns, Addr: other})
	if err == nil || !strings.Contains(err.Error(), "is on no interface of network namespace "+ns) {
		t.Errorf("Addr %s outside the namespace: %v", other, err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), ceph.StartTimeout)
	defer cancel()
	// ext4's largest file is 16 TiB: BlueStore cannot make 1 PiB.
	_, err = ceph.Start(ctx, ceph.Options{Dir: dir, NetNS: ns, Addr: addr, BlockSize: 1 << 50})
	if err == nil {
		t.Fatal("a 1 PiB block file started")
	}
	t.Logf("the error: %v", err)
	for _, want := range []string{"ceph-osd -c " + dir + "/ceph.conf -i 0 --mkfs", "--- ceph-mon.a.log (end)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not hold %q", want)
		}
	}
	if left := ceph.PidsUsing(filepath.Join(dir, "ceph.conf")); len(left) > 0 {
		t.Errorf("processes %v of the failed start still run", left)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists (%v)", dir, err)
	}
}

// logRSS logs the daemons' resident memory.
func logRSS(t *testing.T, when string, mon, osd int) {
	t.Helper()
	var rss [2]int64
	for i, pid := range []int{mon, osd} {
		st, err := procfs.ProcStatus(pid, "VmRSS")
		if err != nil {
			t.Error(err)
		}
		rss[i] = st["VmRSS"] >> 10
	}
	t.Logf("RSS %s: ceph-mon %d MiB, ceph-osd %d MiB, together %d MiB", when, rss[0], rss[1], rss[0]+rss[1])
}
