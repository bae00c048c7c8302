package launcher

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// list-networks prints the active libvirt networks with their bridges:
// libvirt's test driver has exactly one ("default" on virbr0); the real
// libvirtd's list, whatever it holds, parses and is sorted.
func TestListNetworks(t *testing.T) {
	uri := requireLibvirt(t)
	bin := launcherBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := ListNetworks(ctx, bin, "test:///default")
	if err != nil {
		t.Fatal(err)
	}
	if want := []NetworkInfo{{Name: "default", Bridge: "virbr0"}}; !slices.Equal(got, want) {
		t.Fatalf("list-networks on the test driver = %+v, want %+v", got, want)
	}

	got, err = ListNetworks(ctx, bin, uri)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.IsSortedFunc(got, func(a, b NetworkInfo) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("list-networks on %s is not sorted: %+v", uri, got)
	}
	for _, n := range got {
		if n.Name == "" {
			t.Errorf("list-networks on %s: a network without a name: %+v", uri, got)
		}
	}
	t.Logf("active networks on %s: %+v", uri, got)

	// A network of the test's own appears with its bridge: transient
	// (gone once destroyed), isolated (no forward, no address), named
	// uniquely.
	if !strings.HasPrefix(uri, "qemu") {
		return
	}
	id := rand.Text()[:10] // fits "vpt"+id in an interface name's 15 bytes
	name, bridge := "vptest-"+id, "vpt"+id
	xml := fmt.Sprintf("<network><name>%s</name><bridge name='%s' stp='off'/></network>", name, bridge)
	file := filepath.Join(t.TempDir(), "net.xml")
	if err := os.WriteFile(file, []byte(xml), 0o600); err != nil {
		t.Fatal(err)
	}
	virsh := func(args ...string) error {
		// Not ctx: the cleanup runs after it is cancelled.
		vctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := exec.CommandContext(vctx, "virsh", append([]string{"-c", uri}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("virsh %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := virsh("net-create", file); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := virsh("net-destroy", name); err != nil {
			t.Errorf("removing the test network: %v", err)
		}
	})
	got, err = ListNetworks(ctx, bin, uri)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got, NetworkInfo{Name: name, Bridge: bridge}) {
		t.Errorf("list-networks = %+v, want %s on %s among them", got, name, bridge)
	}

	if _, err := ListNetworks(ctx, bin, "qemu+unix:///system?socket=/nonexistent/sock"); err == nil ||
		!strings.Contains(err.Error(), "list-networks") {
		t.Errorf("unreachable libvirtd: %v", err)
	}
}
