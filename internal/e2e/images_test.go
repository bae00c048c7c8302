package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/guestnet"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// imageServer serves files on 127.0.0.1 with ranges and ETags, records
// each request's Range header per path, and can hold a path's first
// response after half of it until released.
type imageServer struct {
	*httptest.Server
	files map[string][]byte

	mu      sync.Mutex
	ranges  map[string][]string
	stall   map[string]chan struct{} // path → closed to release
	stalled map[string]bool
}

func newImageServer(t *testing.T, files map[string][]byte) *imageServer {
	s := &imageServer{files: files, ranges: map[string][]string{}, stall: map[string]chan struct{}{}, stalled: map[string]bool{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		s.mu.Lock()
		for p, ch := range s.stall {
			if !s.stalled[p] {
				close(ch)
				s.stalled[p] = true
			}
		}
		s.mu.Unlock()
		s.Close()
	})
	return s
}

func (s *imageServer) serve(w http.ResponseWriter, r *http.Request) {
	content, ok := s.files[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	s.ranges[r.URL.Path] = append(s.ranges[r.URL.Path], r.Header.Get("Range"))
	ch, hold := s.stall[r.URL.Path]
	first := len(s.ranges[r.URL.Path]) == 1
	s.mu.Unlock()
	w.Header().Set("ETag", `"`+sum(content)[:16]+`"`)
	if hold && first {
		half := len(content) / 2
		w.Header().Set("Content-Length", strconv.Itoa(len(content)))
		w.WriteHeader(http.StatusOK)
		w.Write(content[:half])
		w.(http.Flusher).Flush()
		select {
		case <-ch:
			w.Write(content[half:])
		case <-r.Context().Done():
		}
		return
	}
	http.ServeContent(w, r, filepath.Base(r.URL.Path), time.Unix(1700000000, 0), bytes.NewReader(content))
}

func (s *imageServer) holdFirst(path string) {
	s.mu.Lock()
	s.stall[path] = make(chan struct{})
	s.mu.Unlock()
}

// release lets a held response finish.
func (s *imageServer) release(path string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stalled[path] {
		close(s.stall[path])
		s.stalled[path] = true
	}
}

func (s *imageServer) rangesOf(path string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ranges[path])
}

// loopbackImageSource lets nodes download Images from the tests' servers
// on 127.0.0.1, which the default policy refuses: serve's flag, for
// harnesses that run the server as a process.
var loopbackImageSource = []string{"--image-source-cidrs", "127.0.0.1/32"}

// imagePolicy is the default policy with cidrs allowed, for servers in
// this process.
func imagePolicy(t *testing.T, cidrs ...string) imagepolicy.Policy {
	t.Helper()
	p := imagepolicy.Default()
	var err error
	if p.SourceCIDRs, err = imagepolicy.ParseCIDRs(cidrs); err != nil {
		t.Fatal(err)
	}
	return p
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

func (c *cluster) createImage(name, url, sha, nodes string) {
	c.t.Helper()
	_, err := c.api.Images.Create(c.ctx, &apiv1.CreateImageRequest{Image: &apiv1.Image{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Spec:     &apiv1.ImageSpec{Url: url, Sha256: sha, Nodes: nodes},
	}})
	c.must(err)
	c.t.Cleanup(func() {
		_, _ = c.api.Images.Delete(c.ctx, &apiv1.DeleteImageRequest{Name: name})
		// The node removes its copy when the Image goes; remove whatever
		// a failed test left in the shared image directory.
		_ = os.Remove(filepath.Join(env.imageDir, name))
		_ = os.Remove(filepath.Join(env.imageDir, "."+name+".info.json"))
	})
}

// nodeEntry is the cluster node's entry in the Image's status, or nil.
func (c *cluster) nodeEntry(name string) *apiv1.ImageNodeStatus {
	c.t.Helper()
	img, err := c.api.Images.Get(c.ctx, &apiv1.GetImageRequest{Name: name})
	c.must(err)
	for _, e := range img.GetStatus().GetNodes() {
		if e.GetNode() == c.node {
			return e
		}
	}
	return nil
}

// imageDirHolds lists the entries of the shared image directory whose
// names contain id.
func imageDirHolds(t *testing.T, id string) []string {
	ents, err := os.ReadDir(env.imageDir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.Contains(e.Name(), id) {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestImagePull: an instance whose kernel and initrd are Images served
// from 127.0.0.1 (which the server allows) waits while its node pulls
// them (Provisioning shows the pull), then boots from them; the node's
// entry in each Image's status is Ready with the checksum; the pulled
// files, and a kernel and initrd imported with `image import`, which a
// second guest boots from, are readable by QEMU's user and by no other;
// a wrong checksum leaves no image and says so; an agent SIGKILLed
// mid-download leaves no image, and its successor resumes the download
// with a range request; deleting the Images removes the node's copies.
func TestImagePull(t *testing.T) {
	c := newCluster(t, clusterOptions{imagePolicy: imagePolicy(t, "127.0.0.1/32")})
	kernel, err := os.ReadFile(filepath.Join(env.imageDir, env.kernel))
	c.must(err)
	initrd, err := os.ReadFile(filepath.Join(env.imageDir, testguest.InitrdFile))
	c.must(err)
	id := c.ns
	kName, iName, badName, slowName := "kernel-"+id, "initrd-"+id, "bad-"+id+".raw", "slow-"+id+".raw"
	srv := newImageServer(t, map[string][]byte{"/kernel": kernel, "/initrd": initrd, "/slow": kernel})

	// On demand: nothing is pulled before an instance needs it. The
	// kernel's download stops halfway until the test has seen the
	// instance show it.
	srv.holdFirst("/kernel")
	c.createImage(kName, srv.URL+"/kernel", sum(kernel), "")
	c.createImage(iName, srv.URL+"/initrd", sum(initrd), "")
	vm := c.guestVM("pulled", apiv1.RunStrategyAlways, testguest.Cmdline())
	kb := vm.Spec.Template.Spec.Domain.Firmware.KernelBoot
	kb.Kernel, kb.Initrd = kName, iName
	c.create(vm)
	testutil.Eventually(t, stateTimeout, "the instance shows the kernel's pull halfway", func() bool {
		v := c.vmi("pulled")
		for _, cond := range v.GetStatus().GetConditions() {
			msg := cond.GetMessage()
			if cond.GetType() == apiv1.ConditionProvisioning &&
				(strings.Contains(msg, "pulling image "+kName+": 49% of") || strings.Contains(msg, "pulling image "+kName+": 50% of")) {
				return v.GetStatus().GetPhase() == apiv1.PhaseScheduled
			}
		}
		return false
	})
	srv.release("/kernel")
	vmi := c.waitRunning("pulled", "")
	c.console(vmi.Metadata.Uid).waitMarker(testguest.MarkerBooted, bootTimeout)
	for name, content := range map[string][]byte{kName: kernel, iName: initrd} {
		e := c.nodeEntry(name)
		if e.GetPhase() != "Ready" || e.GetSha256() != sum(content) || e.GetSizeBytes() != int64(len(content)) || e.GetFormat() != "raw" {
			t.Errorf("image %s: node entry %v", name, e)
		}
	}

	// Imported by the operator's CLI: the same modes, and a guest boots
	// from them.
	ikName, iiName := "kimp-"+id, "iimp-"+id
	for name, src := range map[string]string{ikName: env.kernel, iiName: testguest.InitrdFile} {
		if out, err := exec.Command(env.agent, "image", "import", "--image-dir", env.imageDir, name, filepath.Join(env.imageDir, src)).CombinedOutput(); err != nil {
			t.Fatalf("image import %s: %v\n%s", name, err, out)
		}
		t.Cleanup(func() {
			_ = os.Remove(filepath.Join(env.imageDir, name))
			_ = os.Remove(filepath.Join(env.imageDir, "."+name+".info.json"))
		})
	}
	qemuUIDs, qemuGIDs, err := guestnet.QEMUIDs(c.ctx, "", env.uri)
	c.must(err)
	for _, name := range []string{kName, iName, ikName, iiName} {
		onlyQEMUReads(t, filepath.Join(env.imageDir, name), qemuUIDs[0], qemuGIDs[0])
	}
	imp := c.guestVM("imported", apiv1.RunStrategyAlways, testguest.Cmdline())
	kb = imp.Spec.Template.Spec.Domain.Firmware.KernelBoot
	kb.Kernel, kb.Initrd = ikName, iiName
	c.create(imp)
	c.console(c.waitRunning("imported", "").Metadata.Uid).waitMarker(testguest.MarkerBooted, bootTimeout)
	_, err = c.api.VMs.Delete(c.ctx, &apiv1.DeleteVirtualMachineRequest{Key: c.key("imported")})
	c.must(err)
	testutil.Eventually(t, stateTimeout, "VM imported gone", func() bool { return c.vmi("imported") == nil })
	for _, name := range []string{ikName, iiName} {
		if out, err := exec.Command(env.agent, "image", "remove", "--image-dir", env.imageDir, name).CombinedOutput(); err != nil {
			t.Fatalf("image remove %s: %v\n%s", name, err, out)
		}
	}

	// A wrong checksum: nothing appears, the node says why.
	c.createImage(badName, srv.URL+"/kernel", strings.Repeat("0", 64), "all")
	testutil.Eventually(t, stateTimeout, "bad image failed on the node", func() bool {
		e := c.nodeEntry(badName)
		return e.GetPhase() == "Failed" && strings.Contains(e.GetMessage(), "expected "+strings.Repeat("0", 64))
	})
	if got := imageDirHolds(t, "bad-"+id); len(got) != 0 {
		t.Fatalf("a wrong checksum left %q in the image directory", got)
	}

	// SIGKILL mid-download.
	srv.holdFirst("/slow")
	c.createImage(slowName, srv.URL+"/slow", sum(kernel), "all")
	half := int64(len(kernel) / 2)
	testutil.Eventually(t, stateTimeout, "half of the slow image downloaded", func() bool {
		e := c.nodeEntry(slowName)
		return e.GetPhase() == "Pulling" && e.GetBytesDone() == half && e.GetBytesTotal() == int64(len(kernel))
	})
	c.killAgent()
	if got := imageDirHolds(t, "slow-"+id); slices.Contains(got, slowName) {
		t.Fatalf("a half download is visible as the image: %q", got)
	}
	c.startAgent()
	testutil.Eventually(t, stateTimeout, "slow image pulled after the restart", func() bool {
		return c.nodeEntry(slowName).GetPhase() == "Ready"
	})
	if r := srv.rangesOf("/slow"); len(r) != 2 || r[1] != "bytes="+strconv.Itoa(int(half))+"-" {
		t.Fatalf("requests for the slow image had Range %q; want the second to resume at %d", r, half)
	}
	got, err := os.ReadFile(filepath.Join(env.imageDir, slowName))
	c.must(err)
	if sum(got) != sum(kernel) {
		t.Fatal("the resumed image differs from the source")
	}

	// In use: the Image cannot go; once the VM is gone it can, and the
	// node removes its copy.
	if _, err := c.api.Images.Delete(c.ctx, &apiv1.DeleteImageRequest{Name: kName}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("deleting an image in use: %v", err)
	}
	_, err = c.api.VMs.Delete(c.ctx, &apiv1.DeleteVirtualMachineRequest{Key: c.key("pulled")})
	c.must(err)
	testutil.Eventually(t, stateTimeout, "VM pulled gone", func() bool { return c.vmi("pulled") == nil })
	testutil.EventuallyNoError(t, stateTimeout, "images deleted", func() error {
		for _, n := range []string{kName, iName, slowName, badName} {
			if _, err := c.api.Images.Delete(c.ctx, &apiv1.DeleteImageRequest{Name: n}); err != nil && !strings.Contains(err.Error(), "NotFound") && !strings.Contains(err.Error(), "not found") {
				return err
			}
		}
		return nil
	})
	testutil.Eventually(t, stateTimeout, "the node removed its copies", func() bool { return len(imageDirHolds(t, id)) == 0 })
}

// onlyQEMUReads checks that the image at path is 0640 with QEMU's group
// (libvirt may have made QEMU's user its owner while a guest uses it),
// that QEMU's user can read it, and that nobody else but root can: the
// nobody user is refused.
func onlyQEMUReads(t *testing.T, path string, qemuUID, qemuGID uint32) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o640 || st.Gid != qemuGID {
		t.Errorf("%s: mode %v, group %d; want 0640 and QEMU's group %d", path, fi.Mode().Perm(), st.Gid, qemuGID)
	}
	read := func(uid, gid uint32) error {
		cmd := exec.Command("head", "-c", "1", path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, NoSetGroups: true}}
		cmd.Stdout = io.Discard
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%w: %s", err, stderr.String())
		}
		return nil
	}
	if err := read(qemuUID, qemuGID); err != nil {
		t.Errorf("QEMU's user cannot read %s: %v", path, err)
	}
	const nobody = 65534
	if err := read(nobody, nobody); err == nil || !strings.Contains(err.Error(), "Permission denied") {
		t.Errorf("user nobody read %s: %v", path, err)
	}
}
