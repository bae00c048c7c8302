package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// TestExportOfAnRBDVolume: a stopped VM's volume on an rbd class (the
// package's Ceph cluster) is exported by the node that reaches the class,
// copied out of the pool by qemu-img's rbd driver, and the qcow2 download
// is identical to the RBD image (`rbd export` by the cluster's admin).
func TestExportOfAnRBDVolume(t *testing.T) {
	t.Parallel()
	exportAddr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t, "tcp"))
	c := newMultiNodeCluster(t, mnOptions{nodes: 1, ceph: true, nodeArgs: []string{"--export-address", exportAddr}})
	t.Cleanup(c.dumpOnFailure)
	c.rbdClass("ceph")
	c.waitNodesReach("ceph")
	disks := []*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}}
	vols := []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "64Mi", StorageClass: "ceph"}}}
	vm := withDisks(guestVM(c.ns, "rbdvm", apiv1.RunStrategyAlways, c.nodes[0].Kernel,
		testguest.Cmdline(testguest.Persist("/dev/vda"))+" virtplane.tick"), disks, vols)
	if _, err := c.api.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
		t.Fatal(err)
	}
	first := c.waitRunning("rbdvm")
	con := c.nodes[0].console(t, first.GetMetadata().GetUid())
	if wrote := testguest.Fields(con.waitMarker(testguest.MarkerPersistWrote, bootTimeout)); wrote["boot"] != "1" {
		t.Fatalf("first boot wrote %v", wrote)
	}
	if _, err := c.api.VMs.Stop(c.ctx, &apiv1.StopVirtualMachineRequest{Key: c.key("rbdvm")}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, stateTimeout, "the VM stopped", func() bool {
		return c.vm("rbdvm").GetStatus().GetPrintableStatus() == apiv1.PrintableStopped
	})

	resp, err := c.api.Exports.Create(c.ctx, &apiv1.CreateExportRequest{Export: &apiv1.VirtualMachineExport{
		Metadata: &apiv1.ObjectMeta{Namespace: c.ns, Name: "rbdvm"},
		Spec:     &apiv1.VirtualMachineExportSpec{SourceName: "rbdvm"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var e *apiv1.VirtualMachineExport
	testutil.Eventually(t, stateTimeout, "export Ready", func() bool {
		e, err = c.api.Exports.Get(c.ctx, &apiv1.GetExportRequest{Key: c.key("rbdvm")})
		return err == nil && e.GetStatus().GetPhase() == apiv1.ExportReady
	})
	if e.GetStatus().GetNodeName() != c.nodes[0].Name || e.GetStatus().GetVolumes()[0].GetStorageClass() != "ceph" {
		t.Fatalf("export %v", e.GetStatus())
	}
	dir := t.TempDir()
	got := filepath.Join(dir, "data.qcow2")
	hc := exportClient(t, e.GetStatus().GetCaCert())
	if code := exportGet(t, hc, e.Link("data", apiv1.ExportFormatQcow2), resp.GetToken(), func(body io.Reader) {
		f, err := os.Create(got)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		if _, err := io.Copy(f, body); err != nil {
			t.Error(err)
		}
	}); code != http.StatusOK {
		t.Fatalf("download: %d", code)
	}
	cl, _ := sharedCeph.Get(t)
	ref, err := cl.Admin(c.ctx, "rbd", "export", "--no-progress", c.cephPool()+"/"+rbdImageOf(c.vm("rbdvm"), "data"), "-")
	if err != nil {
		t.Fatalf("rbd export: %v", err)
	}
	refPath := filepath.Join(dir, "ref.raw")
	if err := os.WriteFile(refPath, ref, 0o600); err != nil {
		t.Fatal(err)
	}
	imagesIdenticalAs(t, refPath, "raw", got, "qcow2")
	if code := exportGet(t, hc, e.Link("data", apiv1.ExportFormatRaw), "wrong", nil); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", code)
	}
}
