package export

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/storage"
)

type fakeClasses map[string]*storage.Class

func (f fakeClasses) Lookup(_ context.Context, name string) (*storage.Class, error) {
	if c, ok := f[name]; ok {
		return c, nil
	}
	return nil, errors.New("no storage class " + name)
}

type fakeContents map[string]string // content uid -> namespace

func (f fakeContents) Owner(uid string) (string, bool, bool) {
	ns, ok := f[uid]
	return ns, ok, true
}

// volumeFile makes layout's VM directory of vmUID (owned by ns/vm1) with
// volume data.qcow2 in it, and returns the file.
func volumeFile(t *testing.T, layout nodedir.Layout, vmUID, ns string) string {
	t.Helper()
	if err := layout.EnsureVMDir(vmUID, ns, "vm1"); err != nil {
		t.Fatal(err)
	}
	vmDir, _ := layout.VMDir(vmUID)
	if err := os.MkdirAll(nodedir.VolumesDir(vmDir), 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(nodedir.VolumesDir(vmDir), "data.qcow2")
	if err := os.WriteFile(p, []byte("qcow2"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The file or image a download reads is built from the export's checked
// uids and names on this node, never taken from the export: each kind of
// source, and what each refuses.
func TestExportSourceIsBuiltFromCheckedNames(t *testing.T) {
	ctx := context.Background()
	layout := nodedir.Layout{Root: t.TempDir()}
	shared := t.TempDir()
	sharedClass := &storage.Class{Name: "nfs", Spec: &apiv1.StorageClass{Spec: &apiv1.StorageClassSpec{
		SharedFilesystem: &apiv1.SharedFilesystemStorage{Path: shared}}}}
	rbdSpec := &apiv1.StorageClass{Spec: &apiv1.StorageClassSpec{Rbd: &apiv1.RBDStorage{Pool: "vms"}}}
	conn := &ceph.Conn{}
	s := &Server{opts: Options{Layout: layout,
		Classes: fakeClasses{
			"nfs":      sharedClass,
			"ceph":     {Name: "ceph", Spec: rbdSpec, Conn: conn},
			"ceph-off": {Name: "ceph-off", Spec: rbdSpec},
			"neither":  {Name: "neither", Spec: &apiv1.StorageClass{Spec: &apiv1.StorageClassSpec{}}},
		},
		Contents: fakeContents{},
	}}

	vmUID := uuid.NewString()
	local := volumeFile(t, layout, vmUID, "ns1")
	onShared := volumeFile(t, sharedClass.SharedLayout(), vmUID, "ns1")
	contentUID, otherContent := uuid.NewString(), uuid.NewString()
	s.opts.Contents.(fakeContents)[contentUID] = "ns1"
	s.opts.Contents.(fakeContents)[otherContent] = "ns2"
	copyPath, _ := layout.SnapshotVolumePath(contentUID, "data")
	if err := os.MkdirAll(filepath.Dir(copyPath), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(copyPath, []byte("qcow2"), 0o600); err != nil {
		t.Fatal(err)
	}

	export := func(ns, vm, content string) *apiv1.VirtualMachineExport {
		return &apiv1.VirtualMachineExport{
			Metadata: &apiv1.ObjectMeta{Namespace: ns, Name: "ex"},
			Spec:     &apiv1.VirtualMachineExportSpec{SourceKind: apiv1.KindVirtualMachine, SourceName: vm},
			Status:   &apiv1.VirtualMachineExportStatus{SourceUid: vmUID, ContentUid: content},
		}
	}
	vol := func(class string) *apiv1.ExportVolume { return &apiv1.ExportVolume{Name: "data", StorageClass: class} }

	for _, c := range []struct {
		name    string
		e       *apiv1.VirtualMachineExport
		v       *apiv1.ExportVolume
		want    volumeSource
		wantErr string
	}{
		{"local volume", export("ns1", "vm1", ""), vol(""), volumeSource{path: local}, ""},
		{"local volume of another VM", export("ns1", "vm2", ""), vol(""), volumeSource{}, "not ns1/vm2"},
		{"shared filesystem", export("ns1", "vm1", ""), vol("nfs"), volumeSource{path: onShared}, ""},
		{"rbd", export("ns1", "vm1", ""), vol("ceph"), volumeSource{rbd: conn, image: ceph.VolumeImage(vmUID, "data")}, ""},
		{"rbd not connected", export("ns1", "vm1", ""), vol("ceph-off"), volumeSource{}, "not connected"},
		{"neither rbd nor shared", export("ns1", "vm1", ""), vol("neither"), volumeSource{}, "not a shared filesystem"},
		{"unknown class", export("ns1", "vm1", ""), vol("gone"), volumeSource{}, "no storage class"},
		{"snapshot copy", export("ns1", "vm1", contentUID), vol(""), volumeSource{path: copyPath}, ""},
		{"snapshot of another namespace", export("ns1", "vm1", otherContent), vol(""), volumeSource{}, "not of namespace ns1"},
	} {
		got, err := s.source(ctx, c.e, c.v)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.wantErr)
		case err == nil && got != c.want:
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}

	// A volume that is a symlink is not followed.
	if err := os.Remove(local); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", local); err != nil {
		t.Fatal(err)
	}
	if _, err := s.source(ctx, export("ns1", "vm1", ""), vol("")); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("symlinked volume: %v", err)
	}
	// A node with no storage classes serves only local volumes.
	s.opts.Classes = nil
	if _, err := s.source(ctx, export("ns1", "vm1", ""), vol("nfs")); err == nil || !strings.Contains(err.Error(), "no storage classes") {
		t.Errorf("no classes: %v", err)
	}
}
