package ceph_test

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	cephtest "github.com/virtplane/terraform-provider-virtplane/internal/testutil/ceph"
)

var shared cephtest.Shared

func TestMain(m *testing.M) {
	os.Exit(shared.CloseAfter(m.Run()))
}

// conn is a connection as the server makes one: from the host's namespace
// (the shared hub's host link), as a restricted user with the caps
// docs/storage.md asks for, its key in a 0600 file.
func conn(t *testing.T, caps ...string) (*ceph.Conn, *cephtest.Cluster) {
	t.Helper()
	c, _ := shared.Get(t)
	user := "t" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	if len(caps) == 0 {
		caps = []string{"mon", `profile rbd, allow command "osd blocklist" with blocklistop=rm`, "osd", "profile rbd pool=" + c.Pool()}
	}
	key, err := c.CreateUser(t.Context(), user, caps...)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte(key), 0o600); err != nil {
		t.Fatal(err)
	}
	return &ceph.Conn{Monitors: c.Monitors(), Pool: c.Pool(), User: user, KeyFile: file}, c
}

func TestProbeSaysWhatIsWrong(t *testing.T) {
	cn, c := conn(t)
	ctx := t.Context()
	if err := cn.Probe(ctx); err != nil {
		t.Fatalf("probe: %v", err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*ceph.Conn)
		want   error
		within time.Duration
	}{
		{"missing pool", func(x *ceph.Conn) { x.Pool = "nopool" }, ceph.ErrNotFound, 10 * time.Second},
		{"wrong key", func(x *ceph.Conn) {
			f := filepath.Join(t.TempDir(), "bad")
			_ = os.WriteFile(f, []byte("AQCauhZroSmaLxAADcjclatTLvDt1b2rQ3bj4Q=="), 0o600)
			x.KeyFile = f
		}, ceph.ErrDenied, 20 * time.Second},
		{"monitor nobody listens on", func(x *ceph.Conn) {
			ap := netip.MustParseAddrPort(c.Monitors()[0])
			x.Monitors = []string{netip.AddrPortFrom(ap.Addr(), 3999).String()}
		}, ceph.ErrUnreachable, 30 * time.Second},
	} {
		bad := *cn
		tc.mutate(&bad)
		start := time.Now()
		err := bad.Probe(ctx)
		took := time.Since(start)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if took > tc.within {
			t.Errorf("%s: took %v, want under %v", tc.name, took, tc.within)
		}
		t.Logf("%s: %v in %v", tc.name, err, took.Round(time.Millisecond))
	}
}

func TestImagesSnapshotsClones(t *testing.T) {
	cn, _ := conn(t)
	ctx := t.Context()
	src := filepath.Join(t.TempDir(), "src.qcow2")
	if out, err := exec.CommandContext(ctx, "qemu-img", "create", "-f", "qcow2", src, "3M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v %s", err, out)
	}
	base := ceph.BaseImage(strings.Repeat("ab", 32))
	t.Cleanup(func() {
		ctx := context.Background()
		_ = cn.SnapUnprotect(ctx, base, ceph.BaseSnap)
		_ = cn.SnapRemove(ctx, base, ceph.BaseSnap)
		_ = cn.Remove(ctx, base)
	})
	if err := cn.Import(ctx, src, "qcow2", 3<<20, base, base+".tmp-n1"); err != nil {
		t.Fatal(err)
	}
	// A second import (another node) finds it and leaves no temporary.
	if err := cn.Import(ctx, src, "qcow2", 3<<20, base, base+".tmp-n2"); err != nil {
		t.Fatal(err)
	}
	names, err := cn.List(ctx)
	if err != nil || !slices.Contains(names, base) || slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, ".tmp-") }) {
		t.Fatalf("images after two imports: %v %v", names, err)
	}
	owner := "6f1c0e1e-4d7b-4d55-9a43-1b2f3c4d5e6f"
	vol := ceph.VolumeImage(owner, "root")
	t.Cleanup(func() { _ = cn.Remove(context.Background(), vol) })
	if err := cn.Clone(ctx, base, ceph.BaseSnap, vol); err != nil {
		t.Fatal(err)
	}
	if err := cn.Clone(ctx, base, ceph.BaseSnap, vol); !errors.Is(err, ceph.ErrExists) {
		t.Fatalf("second clone: %v, want ErrExists", err)
	}
	if err := cn.Resize(ctx, vol, 5<<20+512); err != nil {
		t.Fatal(err)
	}
	info, err := cn.Info(ctx, vol)
	if err != nil || info.Size != 5<<20+512 || info.Parent == nil || info.Parent.Image != base || !slices.Contains(info.Features, "exclusive-lock") {
		t.Fatalf("info of the clone: %+v %v", info, err)
	}
	if ceph.OwnerOf(vol) != owner || ceph.OwnerOf(base) != "" {
		t.Fatalf("OwnerOf(%s) = %q, OwnerOf(base) = %q", vol, ceph.OwnerOf(vol), ceph.OwnerOf(base))
	}
	kids, err := cn.Children(ctx, base, ceph.BaseSnap)
	if err != nil || !slices.Contains(kids, cn.Pool+"/"+vol) {
		t.Fatalf("children: %v %v", kids, err)
	}
	snap := ceph.SnapshotName("c0ffee00-0000-4000-8000-000000000001")
	if err := cn.SnapCreate(ctx, vol, snap); err != nil {
		t.Fatal(err)
	}
	if snaps, err := cn.Snaps(ctx, vol); err != nil || len(snaps) != 1 || snaps[0].Name != snap {
		t.Fatalf("snaps: %v %v", snaps, err)
	}
	if err := cn.Remove(ctx, vol); !errors.Is(err, ceph.ErrBusy) {
		t.Fatalf("removing an image with a snapshot: %v, want ErrBusy", err)
	}
	if err := cn.SnapRemove(ctx, vol, snap); err != nil {
		t.Fatal(err)
	}
	if w, err := cn.Watchers(ctx, vol); err != nil || len(w) != 0 {
		t.Fatalf("watchers of an image nobody opened: %v %v", w, err)
	}
	if err := cn.Remove(ctx, vol); err != nil {
		t.Fatal(err)
	}
	if _, err := cn.Info(ctx, vol); !errors.Is(err, ceph.ErrNotFound) {
		t.Fatalf("info after remove: %v", err)
	}
	if err := cn.Remove(ctx, vol); err != nil {
		t.Fatalf("removing a removed image: %v", err)
	}
	blank := ceph.VolumeImage(owner, "data")
	t.Cleanup(func() { _ = cn.Remove(context.Background(), blank) })
	if err := cn.Create(ctx, blank, 1<<30); err != nil {
		t.Fatal(err)
	}
	if info, err := cn.Info(ctx, blank); err != nil || info.Size != 1<<30 || info.Parent != nil {
		t.Fatalf("blank image: %+v %v", info, err)
	}
}

func TestBlocklistByHost(t *testing.T) {
	cn, c := conn(t)
	ctx := t.Context()
	ip := netip.MustParseAddr("169.254.0.77") // no node of any run has it
	if err := cn.BlocklistAdd(ctx, ip, time.Hour); err != nil {
		t.Fatal(err)
	}
	entries, err := cn.Blocklist(ctx)
	if err != nil || !slices.ContainsFunc(entries, func(e ceph.BlocklistEntry) bool { return e.Addr == "169.254.0.77:0/0" }) {
		t.Fatalf("blocklist after add: %v %v", entries, err)
	}
	if err := cn.BlocklistRemove(ctx, ip); err != nil {
		t.Fatal(err)
	}
	if err := cn.BlocklistRemove(ctx, ip); err != nil {
		t.Fatalf("removing a removed entry: %v", err)
	}
	if got, err := c.Blocklist(ctx); err != nil || slices.Contains(got, "169.254.0.77:0/0") {
		t.Fatalf("blocklist after remove: %v %v", got, err)
	}
}

// TestFailedImportLeavesNothing: an import that fails midway (the source
// is not the image it claims to be) leaves neither the base nor its
// temporary in the pool: no half-made image is ever taken for a base.
func TestFailedImportLeavesNothing(t *testing.T) {
	cn, _ := conn(t)
	ctx := t.Context()
	src := filepath.Join(t.TempDir(), "broken.qcow2")
	if err := os.WriteFile(src, []byte("not a qcow2 image"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := ceph.BaseImage(strings.Repeat("cd", 32))
	if err := cn.Import(ctx, src, "qcow2", 3<<20, base, base+".tmp-n1"); err == nil {
		t.Fatal("import of a broken image succeeded")
	}
	names, err := cn.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, base) }) {
		t.Fatalf("a failed import left %v", names)
	}
}
