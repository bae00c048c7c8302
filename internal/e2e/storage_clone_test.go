package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	cephtest "github.com/virtplane/terraform-provider-virtplane/internal/testutil/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/imagefill"
)

// cloneAllowed is how much later than the fastest VM from the small image
// the fastest from the 2 GiB image may be Running on rbd: 50 % more plus
// 0.5 s. Nothing on the clone path depends on the image's data (the node
// agent reads the image's cached checksum, asks `rbd info` for the base
// and runs `rbd clone`, which writes the child's header and a reference
// to base@snapshot, never a data object; QEMU then opens the clone as it
// opens any image; measured apart, both take the same for either image
// within 45 ms, docs/performance.md section 8), so the two differ by
// noise. The fastest of three is compared, not the median: a shared host
// only ever adds time, and single starts of either kind spread from 0.65
// to 3.9 s at load averages of 2–15 (measured), which let medians of two
// or three cross the bound twice in eleven runs; the fastest ones were
// 0.62–2.5 s (small) and 0.52–1.9 s (large), never more than 0.8 s apart.
// The 0.5 s covers what is left of one start's spread, the 50 % a host
// that stays loaded through all of them. A copy of 2 GiB cannot meet it:
// it makes every start from the image slower, the fastest too (11–12 s,
// with the node agent made to import instead of clone), and the local copy
// the test times next to it took 3.2–21 s here (3.2 s with the image in
// the page cache).
func cloneAllowed(small time.Duration) time.Duration {
	return small + small/2 + 500*time.Millisecond
}

// filledImageSize is the large image's virtual size, every byte written.
const filledImageSize = 2 << 30

// TestRBDVolumeFrom2GiBImageIsAClone is issue 34's acceptance "a VM from a
// 2 GiB image on rbd is Running as fast as one from a 20 MiB image (clone,
// not copy)": persistent volumes on an rbd class made from the test
// guest's disk (35 MiB virtual, 11 MiB of data) and from a raw image of 2
// GiB with every byte written. The first VM from each image imports it
// into the pool (once per pool, logged); the ones after it are clones of
// that base and are compared: the fastest create → Running of three from
// the 2 GiB image is within cloneAllowed of the small image's, each
// volume's `rbd info` names the base's snapshot as its parent, and `rbd
// du` finds no data of its own in it. The same 2 GiB image as a local
// volume (a qcow2 copy on the node, as before storage classes) is timed
// too and must miss the bound: the bound tells a clone from a copy.
//
// The image is really written, not sparse: a sparse one would make the
// local copy (qemu-img skips holes) and the import as fast as the clone,
// and prove nothing. It costs 2 GiB written to the node's image dir, 2
// GiB imported into the pool and a 2 GiB local copy, all removed at the
// end (about 60 s of the test's time on a loaded host).
func TestRBDVolumeFrom2GiBImageIsAClone(t *testing.T) {
	c := newMultiNodeCluster(t, mnOptions{nodes: 1, ceph: true})
	t.Cleanup(c.dumpOnFailure)
	c.rbdClass("ceph")
	c.waitNodesReach("ceph")
	cl, _ := sharedCeph.Get(t)
	n := c.nodes[0]
	_, osd := cl.Pids()
	osdBefore := vmRSSMiB(osd)

	guestDir, err := testguest.Dir()
	if err != nil {
		t.Fatal(err)
	}
	small := "small-" + c.ns + ".qcow2"
	copyImage(t, filepath.Join(guestDir, testguest.DiskFile), filepath.Join(n.ImageDir, small))
	large := "large-" + c.ns + ".raw"
	began := time.Now()
	largePath := filepath.Join(n.ImageDir, large)
	t.Cleanup(func() { _ = os.Remove(largePath) })
	if err := imagefill.Write(largePath, filledImageSize, filledImageSize); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote the 2 GiB image in %s", time.Since(began).Round(time.Millisecond))
	// Listed by the node with its checksum (which names the pool's base)
	// before the first VM: the node agent hashes a new image once.
	bases := map[string]string{small: ceph.BaseImage(c.nodeImageSHA256(n, small)), large: ceph.BaseImage(c.nodeImageSHA256(n, large))}
	sizes := map[string]string{small: "35Mi", large: "2Gi"} // each image's virtual size: no resize

	vmFrom := func(name, image, class string) *apiv1.VirtualMachine {
		disks := []*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}}
		vols := []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: sizes[image], Image: image, StorageClass: class}}}
		vm := withDisks(c.guestVM(name, n, testguest.Cmdline()), disks, vols)
		// Deleted at once, guest booted or not: the next start measured
		// has the host to itself.
		grace := int64(0)
		vm.Spec.Template.Spec.TerminationGracePeriodSeconds = &grace
		return vm
	}
	// start creates the VM, waits until its instance runs and returns
	// create → Running by the server's timestamps; then it deletes the
	// VM and waits until the instance is gone, so that no booting guest
	// weighs on the next start.
	start := func(name, image, class string) time.Duration {
		t.Helper()
		vm, err := c.api.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: vmFrom(name, image, class)})
		if err != nil {
			t.Fatal(err)
		}
		vmi := c.waitRunning(name)
		took := apiv1.PhaseSince(vmi.GetStatus().GetPhaseTransitionTimestamps(), apiv1.PhaseRunning).
			Sub(vm.GetMetadata().GetCreationTimestamp().AsTime())
		if class != "" {
			checkClone(t, cl, c.cephPool(), ceph.VolumeImage(vm.GetMetadata().GetUid(), "data"), bases[image])
		}
		if _, err := c.api.VMs.Delete(c.ctx, &apiv1.DeleteVirtualMachineRequest{Key: c.key(name)}); err != nil {
			t.Fatal(err)
		}
		testutil.Eventually(t, stateTimeout, name+"'s instance gone", func() bool { return c.vmi(name) == nil })
		t.Logf("%s from %s on %s: Running %s after the create", name, image, classOrLocal(class), took.Round(time.Millisecond))
		return took
	}

	// The first VM from each image imports it: its start is not compared.
	importSmall := start("import-small", small, "ceph")
	importLarge := start("import-large", large, "ceph")
	t.Logf("first VM from each image (import into the pool, then clone): %s small, %s 2 GiB; Ceph OSD RSS %d → %d MiB",
		importSmall.Round(time.Millisecond), importLarge.Round(time.Millisecond), osdBefore, vmRSSMiB(osd))

	var fromSmall, fromLarge []time.Duration
	for i := range 3 {
		s := start(fmt.Sprintf("small-%d", i), small, "ceph")
		l := start(fmt.Sprintf("large-%d", i), large, "ceph")
		fromSmall, fromLarge = append(fromSmall, s), append(fromLarge, l)
	}
	local := start("large-local", large, "")

	fs, fl := slices.Min(fromSmall), slices.Min(fromLarge)
	allowed := cloneAllowed(fs)
	t.Logf("clones: small %v (fastest %s), 2 GiB %v (fastest %s), allowed ≤ %s; the 2 GiB image copied to a local volume: %s (%.1f× the allowed)",
		fromSmall, fs.Round(time.Millisecond), fromLarge, fl.Round(time.Millisecond), allowed.Round(time.Millisecond),
		local.Round(time.Millisecond), float64(local)/float64(allowed))
	if fl > allowed {
		t.Errorf("the fastest VM from the 2 GiB image ran %s after the create, from the small one %s: more than the allowed %s, as if the volume were copied",
			fl.Round(time.Millisecond), fs.Round(time.Millisecond), allowed.Round(time.Millisecond))
	}
	if local <= allowed {
		t.Errorf("the local copy of the 2 GiB image ran %s after the create, within the allowed %s: the bound cannot tell a clone from a copy here",
			local.Round(time.Millisecond), allowed.Round(time.Millisecond))
	}

	// The 2 GiB base leaves the shared pool once no clone refers to it
	// (the storage controller removes the deleted VMs' volumes): the
	// package's other tests need neither its space nor the OSD's memory.
	began = time.Now()
	testutil.EventuallyNoError(t, 2*stateTimeout, "the clones of the 2 GiB base removed", func() error {
		kids, err := cl.Admin(c.ctx, "rbd", "children", c.cephPool()+"/"+bases[large]+"@"+ceph.BaseSnap)
		if err != nil {
			return err
		}
		if len(kids) > 0 {
			return fmt.Errorf("children left: %s", kids)
		}
		return nil
	})
	for _, args := range [][]string{
		{"snap", "unprotect", c.cephPool() + "/" + bases[large] + "@" + ceph.BaseSnap},
		{"snap", "purge", c.cephPool() + "/" + bases[large]},
		{"rm", c.cephPool() + "/" + bases[large]},
	} {
		if _, err := cl.Admin(c.ctx, "rbd", args...); err != nil {
			t.Errorf("removing the 2 GiB base: %v", err)
			return
		}
	}
	t.Logf("the 2 GiB base removed from the pool %s after the last VM's deletion; Ceph OSD RSS %d MiB",
		time.Since(began).Round(time.Millisecond), vmRSSMiB(osd))
}

// checkClone fails t unless pool image `image` is a clone of base's
// protected snapshot holding no data of its own.
func checkClone(t *testing.T, cl *cephtest.Cluster, pool, image, base string) {
	t.Helper()
	out, err := cl.Admin(t.Context(), "rbd", "info", "--format", "json", pool+"/"+image)
	if err != nil {
		t.Fatal(err)
	}
	var info ceph.ImageInfo
	if err := json.Unmarshal(out, &info); err != nil {
		t.Fatalf("rbd info %s: %v: %s", image, err, out)
	}
	if p := info.Parent; p == nil || p.Pool != pool || p.Image != base || p.Snapshot != ceph.BaseSnap {
		t.Fatalf("volume %s has parent %+v, want %s/%s@%s: not a clone of the pool's base", image, info.Parent, pool, base, ceph.BaseSnap)
	}
	out, err = cl.Admin(t.Context(), "rbd", "du", "--format", "json", pool+"/"+image)
	if err != nil {
		t.Fatal(err)
	}
	var du struct {
		Images []struct {
			Name     string `json:"name"`
			Snapshot string `json:"snapshot"`
			Used     int64  `json:"used_size"`
		} `json:"images"`
	}
	if err := json.Unmarshal(out, &du); err != nil {
		t.Fatalf("rbd du %s: %v: %s", image, err, out)
	}
	// The guest does not touch its data disk: whatever the clone holds of
	// its own was written at the start, never the image's data.
	for _, i := range du.Images {
		if i.Name == image && i.Snapshot == "" && i.Used > 4<<20 {
			t.Errorf("volume %s holds %d bytes of its own: the image's data was copied into it", image, i.Used)
		}
	}
}

// nodeImageSHA256 waits until node n lists image name in its status and
// returns the image's SHA-256 as the node computed it.
func (c *mnCluster) nodeImageSHA256(n *mnNode, name string) string {
	c.t.Helper()
	var sum string
	testutil.Eventually(c.t, 2*stateTimeout, n.Name+" listing image "+name, func() bool {
		node, err := c.api.Nodes.Get(c.ctx, &apiv1.GetNodeRequest{Name: n.Name})
		if err != nil {
			return false
		}
		for _, img := range node.GetStatus().GetImages() {
			if img.GetName() == name && img.GetSha256() != "" {
				sum = img.GetSha256()
				return true
			}
		}
		return false
	})
	return sum
}

// copyImage copies image file src to dst (0644, removed when t ends).
func copyImage(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatalf("%v (make guest builds it)", err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(dst) })
}

func classOrLocal(class string) string {
	if class == "" {
		return "local"
	}
	return class
}

// vmRSSMiB is process pid's resident memory in MiB, 0 if unknown.
func vmRSSMiB(pid int) int64 {
	s, err := procfs.ProcStatus(pid, "VmRSS")
	if err != nil {
		return 0
	}
	return s["VmRSS"] >> 10
}
