package netinventory

import (
	"context"
	"crypto/rand"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// ListBridges sees the bridges of the namespace it is pointed at, and
// only bridges: a namespace of the test's own with two bridges, a veth
// pair on one of them and its loopback, none of which the host has.
func TestListBridgesInNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("creating a network namespace needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no ip command (iproute2)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ns := "vptest-" + strings.ToLower(rand.Text()[:10])
	ip("netns", "add", ns)
	t.Cleanup(func() {
		// Not ctx: it is cancelled by now.
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", ns, err, out)
		}
	})
	in := func(args ...string) { t.Helper(); ip(append([]string{"-n", ns}, args...)...) }
	in("link", "add", "vpbr1", "type", "bridge")
	in("link", "add", "vpbr0", "type", "bridge")
	in("link", "add", "vpveth0", "type", "veth", "peer", "name", "vpveth1")
	in("link", "set", "vpveth0", "master", "vpbr0")

	got, err := ListBridges("/run/netns/" + ns)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"vpbr0", "vpbr1"}; !slices.Equal(got, want) {
		t.Fatalf("bridges in %s = %q, want %q", ns, got, want)
	}

	// The process's own namespace: whatever the host has, not the test's.
	own, err := ListBridges("")
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(own, "vpbr0") || !slices.IsSorted(own) {
		t.Fatalf("own namespace: %q", own)
	}

	if _, err := ListBridges("/run/netns/" + ns + "-missing"); err == nil || !strings.Contains(err.Error(), "network namespace") {
		t.Fatalf("missing namespace: %v", err)
	}
}
