package disks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/storage"
)

// The disk room's decisions on an rbd class, with the rbd CLI faked (the
// real one is exercised in internal/ceph and the e2e tests).

const rbdVMUID = "5d1e0f2a-0000-4000-8000-0000000000ee"

// fakePool answers rbd info, create, resize and import for one pool as a
// map of image sizes, and records the commands it was given (without
// the connection's common arguments).
type fakePool struct {
	mu     sync.Mutex
	images map[string]int64
	calls  []string
}

func (f *fakePool) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := slices.Index(args, "--no-mon-config") // the last common argument
	args = args[i+1:]
	f.calls = append(f.calls, strings.Join(args, " "))
	notFound := &ceph.CLIError{Name: name, Stderr: "rbd: error opening image: (2) No such file or directory", Err: errors.New("exit status 2")}
	switch {
	case len(args) >= 2 && args[0] == "info":
		image := strings.TrimPrefix(args[1], "vp/")
		size, ok := f.images[image]
		if !ok {
			return nil, notFound
		}
		return fmt.Appendf(nil, `{"name":%q,"size":%d}`, image, size), nil
	case len(args) == 4 && (args[0] == "create" || args[0] == "resize") && args[2] == "--size":
		size, err := strconv.ParseInt(strings.TrimSuffix(args[3], "B"), 10, 64)
		if err != nil {
			return nil, err
		}
		f.images[strings.TrimPrefix(args[1], "vp/")] = size
		return nil, nil
	}
	return nil, fmt.Errorf("unexpected %s %s", name, strings.Join(args, " "))
}

// count is how many recorded calls start with prefix.
func (f *fakePool) count(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

func rbdTestClass(pool *fakePool) *storage.Class {
	return &storage.Class{Name: "ceph", Spec: &apiv1.StorageClass{Spec: &apiv1.StorageClassSpec{Rbd: &apiv1.RBDStorage{
		Monitors: []string{"192.0.2.7:3300"}, Pool: "vp", User: "vp", Key: "AQCauhZroSmaLxAADcjclatTLvDt1b2rQ3bj4Q=="}}},
		Conn: &ceph.Conn{Monitors: []string{"192.0.2.7:3300"}, Pool: "vp", User: "vp", KeyFile: "/nonexistent", Runner: pool}}
}

func rbdTestVMI(size string, fw *apiv1.Firmware) *apiv1.VirtualMachineInstance {
	return &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Uid: uid1, Namespace: "default", Name: "vm"},
		Spec: &apiv1.VirtualMachineInstanceSpec{
			Domain: &apiv1.DomainSpec{Firmware: fw, Devices: &apiv1.Devices{Disks: []*apiv1.Disk{
				{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}},
			}}},
			Volumes: []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: size, StorageClass: "ceph"}}},
		},
	}
}

func rbdTestRec(t *testing.T, layout nodedir.Layout) *state.VMI {
	t.Helper()
	dir, err := layout.VMIDir(uid1)
	if err != nil {
		t.Fatal(err)
	}
	return &state.VMI{UID: uid1, Namespace: "default", Name: "vm", DomainName: "default_vm", Dir: dir, VMUID: rbdVMUID}
}

// An rbd volume is made and grown to the size a local one is
// (validation.VolumeBytes: whole sectors), the size the launcher is told
// to keep the disk at: an unaligned size ("100M") makes an image of
// exactly that many bytes, never one a running guest's disk is then grown
// from, and an image of that size is not grown again.
func TestRBDVolumeIsMadeAtItsSectorSize(t *testing.T) {
	pool := &fakePool{images: map[string]int64{}}
	layout := nodedir.Layout{Root: t.TempDir()}
	p := New(Options{ImageDir: t.TempDir(), Layout: layout, Classes: fakeClasses{"ceph": rbdTestClass(pool)}})
	rec := rbdTestRec(t, layout)
	ctx := context.Background()
	image := ceph.VolumeImage(rbdVMUID, "data")

	for _, tc := range []struct {
		size string
		want int64
		call string
	}{
		{"100M", 100000256, "create vp/" + image + " --size 100000256B"},
		{"100M", 100000256, ""},
		{"200M", 200000000, "resize vp/" + image + " --size 200000000B"},
		{"250000001", 250000384, "resize vp/" + image + " --size 250000384B"},
		{"250000001", 250000384, ""},
	} {
		pool.calls = nil
		opts, err := p.Prepare(ctx, rbdTestVMI(tc.size, nil), rec)
		if err != nil {
			t.Fatalf("size %s: %v", tc.size, err)
		}
		src := opts.GetDisks()[0]
		if src.GetSizeBytes() != tc.want || src.GetRbd().GetImage() != image || pool.images[image] != tc.want {
			t.Errorf("size %s: disk of %d bytes (image %s of %d), want %d", tc.size, src.GetSizeBytes(), src.GetRbd().GetImage(), pool.images[image], tc.want)
		}
		var changes []string
		for _, c := range pool.calls {
			if !strings.HasPrefix(c, "info ") {
				changes = append(changes, c)
			}
		}
		if want := []string{tc.call}; tc.call == "" && len(changes) != 0 || tc.call != "" && !slices.Equal(changes, want) {
			t.Errorf("size %s: rbd calls %q, want %q", tc.size, changes, tc.call)
		}
		// The image is looked at once per start, whatever is done to it.
		if n := pool.count("info vp/" + image); n != 1 {
			t.Errorf("size %s: rbd info of the volume %d times, want 1", tc.size, n)
		}
	}
}
