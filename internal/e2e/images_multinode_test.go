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

// TestImageOnTwoNodes: the test guest's cloud-style disk image (make
// guest), an Image served from 127.0.0.1 with nodes = all, reaches both
// nodes of a two-host cluster (private libvirtds, each node agent with its
// own data and image directory) by itself; a VM pinned to each node boots
// from it as a qcow2 overlay on a virtio disk, through SeaBIOS on one and
// OVMF on the other, and makes its cloud-init user. An Image with a wrong
// checksum fails on both nodes, says so, and leaves no file on either.
func TestImageOnTwoNodes(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	c := newMultiNodeCluster(t, mnOptions{serverArgs: loopbackImageSource})
	guestDir, err := testguest.Dir()
	if err != nil {
		t.Fatal(err)
	}
	disk, err := os.ReadFile(filepath.Join(guestDir, testguest.DiskFile))
	if err != nil {
		t.Fatalf("%v (make guest builds it)", err)
	}
	srv := newImageServer(t, map[string][]byte{"/disk.qcow2": disk})
	name, bad := "disk-"+c.ns+".qcow2", "bad-"+c.ns+".qcow2"
	create := func(name, sha string) {
		t.Helper()
		if _, err := c.api.Images.Create(c.ctx, &apiv1.CreateImageRequest{Image: &apiv1.Image{
			Metadata: &apiv1.ObjectMeta{Name: name},
			Spec:     &apiv1.ImageSpec{Url: srv.URL + "/disk.qcow2", Sha256: sha, Nodes: "all"},
		}}); err != nil {
			t.Fatalf("creating image %s: %v", name, err)
		}
	}
	create(name, sum(disk))
	create(bad, strings.Repeat("f", 64))

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
	badMessages := map[string]string{}
	testutil.Eventually(t, stateTimeout, "the image Ready on both nodes, the bad one Failed on both", func() bool {
		good, b := entries(name), entries(bad)
		for _, n := range c.nodes {
			if b[n.Name].GetPhase() == "Failed" {
				badMessages[n.Name] = b[n.Name].GetMessage()
			}
		}
		for _, n := range c.nodes {
			if good[n.Name].GetPhase() != "Ready" || badMessages[n.Name] == "" {
				return false
			}
		}
		return true
	})
	for _, n := range c.nodes {
		got, err := os.ReadFile(filepath.Join(n.ImageDir, name))
		if err != nil || sum(got) != sum(disk) {
			t.Fatalf("node %s: image %s: %v (sha %s)", n.Name, name, err, sum(got))
		}
		if e := entries(name)[n.Name]; e.GetFormat() != "qcow2" || e.GetVirtualSizeBytes() == 0 {
			t.Errorf("node %s: entry %v", n.Name, e)
		}
		if msg := badMessages[n.Name]; !strings.Contains(msg, "expected "+strings.Repeat("f", 64)) {
			t.Errorf("node %s: bad image message %q", n.Name, msg)
		}
		ents, err := os.ReadDir(n.ImageDir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if strings.Contains(e.Name(), "bad-"+c.ns) {
				t.Errorf("node %s: the bad image left %s", n.Name, e.Name())
			}
		}
	}

	firmware := []string{"bios", "efi"}
	loaders := []*apiv1.Bootloader{{Bios: &apiv1.BIOSBootloader{}}, {Efi: &apiv1.EFIBootloader{}}}
	uids := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		vm := diskVM(c.ns, firmware[i], name, loaders[i])
		vm.Spec.Template.Spec.NodeSelector = map[string]string{apiv1.LabelNodeName: n.Name}
		if _, err := c.api.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range c.nodes {
		vmi := c.waitRunning(firmware[i])
		if got := vmi.GetStatus().GetNodeName(); got != n.Name {
			t.Fatalf("VM %s runs on %s, pinned to %s", firmware[i], got, n.Name)
		}
		uids[i] = vmi.GetMetadata().GetUid()
	}
	for i, n := range c.nodes {
		con := n.console(t, uids[i])
		booted := testguest.Fields(con.waitMarker(testguest.MarkerBooted, diskBootTimeout))
		if booted["firmware"] != firmware[i] {
			t.Errorf("node %s: booted through %q, want %s", n.Name, booted["firmware"], firmware[i])
		}
		con.waitMarker(testguest.MarkerCloudInitUser, stateTimeout)
		u, _, err := testguest.FindCloudInitUser(con.text())
		if err != nil || u.Name != "alice" || u.Keys != 1 {
			t.Errorf("node %s: cloud-init user %+v, %v", n.Name, u, err)
		}
	}
}
