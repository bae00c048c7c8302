package backup

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
)

// A restore's scratch image is never taken for a VM's image by the
// storage controller's collections (which remove the images of VMs the
// store does not have).
func TestStagedImageIsNoVMImage(t *testing.T) {
	name := stagedImage("6f1c2a3e-0000-4000-8000-000000000001", "data")
	if n := ceph.ParseImage(name); n.Kind != "" {
		t.Fatalf("%s reads as a VM image: %+v", name, n)
	}
}

// The class of each restored volume is the VM spec's, and a manifest
// naming a volume the spec lacks is refused.
func TestManifestClasses(t *testing.T) {
	vm := &apiv1.VirtualMachine{Spec: &apiv1.VirtualMachineSpec{Template: &apiv1.VirtualMachineInstanceTemplateSpec{Spec: &apiv1.VirtualMachineInstanceSpec{
		Volumes: []*apiv1.Volume{
			{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "1Gi", StorageClass: "ceph"}},
			{Name: "local", Persistent: &apiv1.PersistentVolume{Size: "1Gi"}},
		},
	}}}}
	spec, err := protojson.Marshal(vm)
	if err != nil {
		t.Fatal(err)
	}
	m := &repo.Manifest{ID: "x", Spec: spec, Volumes: []repo.Volume{{Name: "data"}, {Name: "local"}}}
	got, err := manifestClasses(m)
	if err != nil || got["data"] != "ceph" || got["local"] != "" || len(got) != 1 {
		t.Fatalf("classes %v, %v", got, err)
	}
	m.Volumes = append(m.Volumes, repo.Volume{Name: "etc"})
	if _, err := manifestClasses(m); err == nil || !strings.Contains(err.Error(), `"etc" is no persistent volume`) {
		t.Fatalf("a volume the spec lacks: %v", err)
	}
}

// Progress adds the volumes up: a volume's report counts from the bytes
// of the volumes done before it.
func TestProgressAcrossVolumes(t *testing.T) {
	p := newProgress(300)
	v1 := p.volume()
	v1(repo.Progress{Done: 50, Total: 100})
	if d, tot := p.get(); d != 50 || tot != 300 {
		t.Fatalf("after half of the first: %d/%d", d, tot)
	}
	p.volumeDone(100)
	v2 := p.volume()
	v2(repo.Progress{Done: 20, Total: 200})
	if d, _ := p.get(); d != 120 {
		t.Fatalf("in the second: %d, want 120", d)
	}
}

// Scratch paths are built from checked uids and names only.
func TestScratchPathsAreChecked(t *testing.T) {
	l := nodedir.Layout{Root: "/var/lib/virtplane-node"}
	if _, err := l.BackupRawPath("../../etc", "data"); err == nil {
		t.Fatal("a uid that is a path was taken")
	}
	if _, err := l.BackupRawPath("6f1c2a3e-0000-4000-8000-000000000001", "../x"); err == nil {
		t.Fatal("a volume name that is a path was taken")
	}
	if p, err := l.BackupRawPath("6f1c2a3e-0000-4000-8000-000000000001", "data"); err != nil || p != "/var/lib/virtplane-node/backups/6f1c2a3e-0000-4000-8000-000000000001/data.raw" {
		t.Fatalf("raw path %q %v", p, err)
	}
}
