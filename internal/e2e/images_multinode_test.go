package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// TestImageOnTwoNodes: Images served from 127.0.0.1 with nodes = all
// reach both nodes of a two-host cluster (private libvirtds, each node
// agent with its own data and image directory) by themselves; a VM pinned
// to each node boots from them; an Image with a wrong checksum fails on
// both nodes, says so, and leaves no file on either.
func TestImageOnTwoNodes(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	c := newMultiNodeCluster(t, mnOptions{})
	src := c.nodes[0]
	kernel, err := os.ReadFile(filepath.Join(src.imageDir, src.kernel))
	if err != nil {
		t.Fatal(err)
	}
	initrd, err := os.ReadFile(filepath.Join(src.imageDir, testguest.InitrdFile))
	if err != nil {
		t.Fatal(err)
	}
	srv := newImageServer(t, map[string][]byte{"/kernel": kernel, "/initrd": initrd})
	kName, iName, bad := "kernel-"+c.ns, "initrd-"+c.ns, "bad-"+c.ns
	create := func(name, url, sha string) {
		t.Helper()
		if _, err := c.api.Images.Create(c.ctx, &apiv1.CreateImageRequest{Image: &apiv1.Image{
			Metadata: &apiv1.ObjectMeta{Name: name},
			Spec:     &apiv1.ImageSpec{Url: url, Sha256: sha, Nodes: "all"},
		}}); err != nil {
			t.Fatalf("creating image %s: %v", name, err)
		}
	}
	create(kName, srv.URL+"/kernel", sum(kernel))
	create(iName, srv.URL+"/initrd", sum(initrd))
	create(bad, srv.URL+"/initrd", strings.Repeat("f", 64))

	entries := func(name string) map[string]*apiv1.ImageNodeStatus {
		img, err := c.api.Images.Get(c.ctx, &apiv1.GetImageRequest{Name: name})
		if err != nil {
			t.Fatalf("getting image %s: %v", name, err)
		}
		out := map[string]*apiv1.ImageNodeStatus{}
		for _, e := range img.GetStatus().GetNodes() {
			out[e.GetNode()] = e
		}
		return out
	}
	testutil.Eventually(t, stateTimeout, "both images Ready on both nodes, the bad one Failed on both", func() bool {
		k, i, b := entries(kName), entries(iName), entries(bad)
		for _, n := range c.nodes {
			if k[n.Name].GetPhase() != "Ready" || i[n.Name].GetPhase() != "Ready" || b[n.Name].GetPhase() != "Failed" {
				return false
			}
		}
		return true
	})
	for _, n := range c.nodes {
		for name, content := range map[string][]byte{kName: kernel, iName: initrd} {
			got, err := os.ReadFile(filepath.Join(n.imageDir, name))
			if err != nil || sum(got) != sum(content) {
				t.Fatalf("node %s: image %s: %v (sha %s)", n.Name, name, err, sum(got))
			}
		}
		// Failed, or retrying and saying why the last attempt failed.
		if e := entries(bad)[n.Name]; !strings.Contains(e.GetMessage(), "expected "+strings.Repeat("f", 64)) {
			t.Errorf("node %s: bad image message %q", n.Name, e.GetMessage())
		}
		ents, err := os.ReadDir(n.imageDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.Contains(e.Name(), bad) {
				t.Errorf("node %s: the bad image left %s", n.Name, e.Name())
			}
		}
	}

	for i, n := range c.nodes {
		name := "img" + strings.Repeat("x", i)
		vm := c.guestVM(name, n, testguest.Cmdline(testguest.Hostname("vp-img-"+n.Name)))
		kb := vm.Spec.Template.Spec.Domain.Firmware.KernelBoot
		kb.Kernel, kb.Initrd = kName, iName
		if _, err := c.api.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
			t.Fatal(err)
		}
		vmi := c.waitRunning(name)
		if got := vmi.GetStatus().GetNodeName(); got != n.Name {
			t.Fatalf("VM %s runs on %s, pinned to %s", name, got, n.Name)
		}
		n.console(t, vmi.GetMetadata().GetUid()).waitMarker(testguest.MarkerBooted, bootTimeout)
	}
}
