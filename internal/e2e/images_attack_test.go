package e2e

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// The attacks of issue 33's defects 2 and 3 (and the persistent volume
// of 7), through the real node agent: Images whose URLs lead to an
// internal service on 127.0.0.1, directly and by a redirect from an
// allowed source; a source that never ends; one that stalls; a 7 MiB
// qcow2 claiming 64 PiB; and a persistent volume copied from such an
// image that an operator imported.

// secret is what the internal service serves; no status may show it.
const secret = "SECRET-METADATA-TOKEN-4f1e9a"

// listenHTTP serves h on ip (a loopback address), counting requests.
func listenHTTP(t *testing.T, ip string, h http.HandlerFunc) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int32
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &n
}

// hugeQCOW2 makes a qcow2 of 7 MiB that claims a virtual size of 64 PiB.
func hugeQCOW2(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "huge.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-o", "cluster_size=2M", path, "64P").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v: %s", err, out)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 7<<20 {
		t.Fatalf("the 64 PiB qcow2: %v, %v", fi, err)
	}
	return path
}

// TestImageDownloadAttacks: with only 127.0.0.2 allowed (the operator's
// mirror), the node agent refuses an Image at the internal service on
// 127.0.0.1 and a redirect to it from 127.0.0.2 at connect time (the
// service sees no request, no status shows what it serves); stops a
// source without Content-Length that never ends at max_size and keeps
// nothing, without downloading it again; stops a source that stalls
// below the minimum speed; refuses a 7 MiB qcow2 claiming 64 PiB and
// keeps nothing; and a VM whose persistent volume would be copied from
// such an image, imported by hand, gets a DataVolumeError and no disk.
func TestImageDownloadAttacks(t *testing.T) {
	pol := imagePolicy(t, "127.0.0.2/32")
	pol.MinSpeedTime = 3 * time.Second // the stall is judged in seconds
	c := newCluster(t, clusterOptions{imagePolicy: pol})
	id := c.ns

	internal, internalHits := listenHTTP(t, "127.0.0.1", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, secret, http.StatusForbidden)
	})
	huge := hugeQCOW2(t)
	var endlessSent atomic.Int64
	var redirects, endlessGets atomic.Int32
	// Closed before the server's Close, which waits for its requests: a
	// node without a speed bound never lets go of the stall.
	testDone := make(chan struct{})
	mirror, _ := listenHTTP(t, "127.0.0.2", func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			redirects.Add(1)
			http.Redirect(w, r, internal.URL+"/latest/meta-data/iam", http.StatusFound)
		case "/endless":
			// No Content-Length, no end (but 400 MB, so that a node
			// without bounds, which takes it as Ready, is not filled).
			endlessGets.Add(1)
			block := make([]byte, 1<<20)
			for endlessSent.Load() < 400<<20 && r.Context().Err() == nil {
				n, err := w.Write(block)
				endlessSent.Add(int64(n))
				if err != nil {
					return
				}
			}
		case "/stall":
			w.Header().Set("Content-Length", "104857600")
			w.Write(make([]byte, 1000))
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-testDone:
			}
		case "/huge.qcow2":
			http.ServeFile(w, r, huge)
		default:
			http.NotFound(w, r)
		}
	})
	t.Cleanup(func() { close(testDone) })

	names := map[string]string{}
	for _, img := range []struct{ name, url, maxSize string }{
		{"internal", internal.URL + "/latest/meta-data/iam", ""},
		{"redirect", mirror.URL + "/redirect", ""},
		{"endless", mirror.URL + "/endless", "64Mi"},
		{"stall", mirror.URL + "/stall", ""},
		{"huge", mirror.URL + "/huge.qcow2", ""},
	} {
		name := img.name + "-" + id + ".raw"
		if img.name == "huge" {
			name = img.name + "-" + id + ".qcow2"
		}
		names[img.name] = name
		_, err := c.api.Images.Create(c.ctx, &apiv1.CreateImageRequest{Image: &apiv1.Image{
			Metadata: &apiv1.ObjectMeta{Name: name},
			Spec:     &apiv1.ImageSpec{Url: img.url, Nodes: "all", MaxSize: img.maxSize},
		}})
		c.must(err)
		t.Cleanup(func() { _, _ = c.api.Images.Delete(c.ctx, &apiv1.DeleteImageRequest{Name: name}) })
	}
	failed := func(t *testing.T, image string, want ...string) *apiv1.ImageNodeStatus {
		t.Helper()
		var e *apiv1.ImageNodeStatus
		defer func() {
			if t.Failed() {
				t.Logf("%s: the node's last entry: %v", image, e)
			}
		}()
		testutil.Eventually(t, stateTimeout, image+" failed on the node", func() bool {
			e = c.nodeEntry(names[image])
			return e.GetPhase() == "Failed"
		})
		for _, w := range want {
			if !strings.Contains(e.GetMessage(), w) {
				t.Errorf("%s: message %q, want %q", image, e.GetMessage(), w)
			}
		}
		if strings.Contains(e.GetMessage(), secret) {
			t.Errorf("%s: the status shows what the internal service serves: %q", image, e.GetMessage())
		}
		got := imageDirHolds(t, strings.TrimSuffix(strings.TrimSuffix(names[image], ".raw"), ".qcow2"))
		if image == "stall" {
			// Not a bound: kept for a resume, and never an image.
			if slices.Contains(got, names[image]) {
				t.Errorf("a stalled download became image %s", names[image])
			}
		} else if len(got) != 0 {
			t.Errorf("%s left %q in the image directory", image, got)
		}
		t.Logf("%s: %s", image, e.GetMessage())
		return e
	}

	loopback := "refused: 127.0.0.1 is a loopback address; allow it with --image-source-cidrs"
	t.Run("InternalService", func(t *testing.T) { failed(t, "internal", loopback) })
	t.Run("RedirectToInternalService", func(t *testing.T) {
		failed(t, "redirect", loopback)
		if n := redirects.Load(); n == 0 {
			t.Error("the allowed source was never asked")
		}
	})
	if n := internalHits.Load(); n != 0 {
		t.Errorf("the internal service got %d requests", n)
	}
	t.Run("Endless", func(t *testing.T) {
		e := failed(t, "endless", "more than max_size 64Mi", "not tried again")
		t.Logf("the endless source sent %d bytes before the node stopped reading", endlessSent.Load())
		if e.GetBytesDone() > 65<<20 {
			t.Errorf("the node reports %d bytes of a 64Mi max_size", e.GetBytesDone())
		}
		// Refused for good: not downloaded again (the node looks again
		// after minutes only to see whether the bounds changed).
		testutil.Consistently(t, 5*time.Second, "no second download of the endless source", func() bool {
			return endlessGets.Load() == 1 && c.nodeEntry(names["endless"]).GetAttempts() == 1
		})
	})
	t.Run("Stall", func(t *testing.T) { failed(t, "stall", "less than 1Ki a second") })
	t.Run("HugeVirtualSize", func(t *testing.T) {
		failed(t, "huge", "virtual size is 64Pi", "--image-max-virtual-size", "not tried again")
	})

	// A persistent volume copied from an image the operator imported by
	// hand, of 64 PiB: a DataVolumeError, and no disk is made.
	t.Run("PersistentVolumeFromHugeImage", func(t *testing.T) {
		pvImage := "hugepv-" + id + ".qcow2"
		if out, err := exec.Command(env.agent, "image", "import", "--image-dir", env.imageDir, pvImage, huge).CombinedOutput(); err != nil {
			t.Fatalf("image import: %v\n%s", err, out)
		}
		t.Cleanup(func() { _ = os.Remove(filepath.Join(env.imageDir, pvImage)) })
		vm := withDisks(c.guestVM("pv", apiv1.RunStrategyAlways, testguest.Cmdline()),
			[]*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}},
			[]*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "64Pi", Image: pvImage}}})
		c.create(vm)
		var cond *apiv1.Condition
		testutil.Eventually(t, stateTimeout, "the instance's DataVolumeError", func() bool {
			cond = apiv1.FindCondition(c.vmi("pv").GetStatus().GetConditions(), apiv1.ConditionSynchronized)
			return cond.GetReason() == apiv1.ReasonDataVolumeError
		})
		for _, w := range []string{pvImage, "virtual size is 64Pi", "--image-max-virtual-size"} {
			if !strings.Contains(cond.GetMessage(), w) {
				t.Errorf("DataVolumeError %q, want %q", cond.GetMessage(), w)
			}
		}
		t.Logf("persistent volume: %s", cond.GetMessage())
		vmDir, err := nodedir.Layout{Root: c.nodeDir}.VMDir(c.vm("pv").GetMetadata().GetUid())
		c.must(err)
		if ents, err := os.ReadDir(nodedir.VolumesDir(vmDir)); err == nil && len(ents) > 0 {
			t.Errorf("volumes made from the 64 PiB image: %v", ents)
		}
		// Its launcher, which has no domain the cleanup would find it by,
		// goes with the instance.
		_, err = c.api.VMs.Delete(c.ctx, &apiv1.DeleteVirtualMachineRequest{Key: c.key("pv")})
		c.must(err)
		testutil.Eventually(t, stateTimeout, "VM pv gone", func() bool { return c.vmi("pv") == nil })
	})
}
