package backup

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo"
)

const backupID = "6f1c2a3e-0000-4000-8000-0000000000e1"

// backedUpVM is a VM as a manifest carries it: a local and an rbd
// volume, one interface.
func backedUpVM() *apiv1.VirtualMachine {
	return &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: "prod", Name: "db", Uid: vmUID, Labels: map[string]string{"app": "db"}},
		Spec: &apiv1.VirtualMachineSpec{RunStrategy: apiv1.RunStrategyAlways, Template: &apiv1.VirtualMachineInstanceTemplateSpec{Spec: &apiv1.VirtualMachineInstanceSpec{
			Domain: &apiv1.DomainSpec{
				Cpu: &apiv1.CPU{Cores: 1}, Memory: &apiv1.Memory{Guest: "128Mi"},
				Devices: &apiv1.Devices{
					Disks:      []*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}, {Name: "disk", Disk: &apiv1.DiskTarget{Bus: "virtio"}}},
					Interfaces: []*apiv1.Interface{{Name: "default", MacAddress: "02:00:00:00:00:01"}},
				},
			},
			Networks: []*apiv1.Network{{Name: "default", User: &apiv1.UserNetwork{}}},
			Volumes: []*apiv1.Volume{
				{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "64Mi"}},
				{Name: "disk", Persistent: &apiv1.PersistentVolume{Size: "64Mi", StorageClass: "ceph"}},
			},
		}}},
	}
}

func manifestOf(t testing.TB, vm *apiv1.VirtualMachine, vols ...repo.Volume) *repo.Manifest {
	t.Helper()
	spec, err := protojson.Marshal(vm)
	if err != nil {
		t.Fatal(err)
	}
	return &repo.Manifest{ID: backupID, VMNamespace: "prod", VMName: "db", VMUID: vmUID, Spec: spec, Volumes: vols}
}

func restoreOf(newIdentity bool) *apiv1.VirtualMachineBackupRestore {
	return &apiv1.VirtualMachineBackupRestore{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "r1", Uid: "6f1c2a3e-0000-4000-8000-0000000000f1"},
		Spec:     &apiv1.VirtualMachineBackupRestoreSpec{Target: "nfs", BackupId: backupID, VmName: "db-copy", NewIdentity: newIdentity},
	}
}

// The VM a manifest describes is made halted, locked, under the
// restore's name and namespace; with a new identity its MAC changes.
func TestRestorePlanMakesAHaltedLockedVM(t *testing.T) {
	f := newFixture(t)
	m := manifestOf(t, backedUpVM(), repo.Volume{Name: "data", ClassKind: apiv1.ClassKindLocal}, repo.Volume{Name: "disk", StorageClass: "ceph", ClassKind: apiv1.ClassKindRBD})
	plan, err := planRestore(restoreOf(true), m, validationOptions(), f.classes.Informer)
	if err != nil {
		t.Fatal(err)
	}
	vm := plan.vm
	if vm.Metadata.Namespace != "default" || vm.Metadata.Name != "db-copy" || vm.Spec.RunStrategy != apiv1.RunStrategyHalted ||
		vm.Status.RestoreInProgress != RestoreLock("r1") || vm.Metadata.Labels["app"] != "db" ||
		vm.Metadata.Annotations[apiv1.AnnotationRestoredFrom] != "nfs/"+backupID {
		t.Fatalf("restored VM: %v", vm)
	}
	if mac := vm.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress; mac == "" || mac == "02:00:00:00:00:01" {
		t.Fatalf("new identity kept or lost the MAC: %q", mac)
	}
	if !plan.pinned || len(plan.classes) != 1 || plan.classes[0].Metadata.Name != "ceph" {
		t.Fatalf("plan: pinned %v classes %v", plan.pinned, plan.classes)
	}
}

// A manifest is read from a target and checked as anything a user
// sends: each refusal names what is wrong.
func TestRestorePlanRefusesHostileManifests(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		name string
		m    func() *repo.Manifest
		want string
	}{
		{"no spec", func() *repo.Manifest { m := manifestOf(t, backedUpVM()); m.Spec = nil; return m }, "carries no VM spec"},
		{"spec not JSON", func() *repo.Manifest { m := manifestOf(t, backedUpVM()); m.Spec = []byte(`{"spec":`); return m }, "does not parse"},
		{"invalid VM", func() *repo.Manifest {
			vm := backedUpVM()
			vm.Spec.Template.Spec.Volumes[0].Persistent.Size = "-1"
			return manifestOf(t, vm)
		}, "not valid here"},
		{"volume not in the spec", func() *repo.Manifest {
			return manifestOf(t, backedUpVM(), repo.Volume{Name: "etc", ClassKind: apiv1.ClassKindLocal})
		}, `"etc" is no persistent volume`},
		{"class kind changed", func() *repo.Manifest {
			return manifestOf(t, backedUpVM(), repo.Volume{Name: "disk", ClassKind: apiv1.ClassKindLocal})
		}, "backed up from a local class"},
		{"class missing here", func() *repo.Manifest {
			vm := backedUpVM()
			vm.Spec.Template.Spec.Volumes[1].Persistent.StorageClass = "other"
			return manifestOf(t, vm, repo.Volume{Name: "disk", ClassKind: apiv1.ClassKindRBD})
		}, `storage class "other" does not exist`},
	} {
		_, err := planRestore(restoreOf(false), tc.m(), validationOptions(), f.classes.Informer)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}

// A restore of a backup the target does not hold fails at once and
// makes nothing.
func TestRestoreOfAMissingBackupFails(t *testing.T) {
	f := newFixture(t)
	if _, err := f.restores.Store.Create(context.Background(), restoreOf(false)); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		f.sync()
		if _, err := f.rc.Reconcile(context.Background(), "default/r1"); err != nil {
			t.Fatal(err)
		}
	}
	r := f.restores.Get(t, "default", "r1")
	if r.Status.Phase != apiv1.BackupFailed || !strings.Contains(r.Status.Error, "is not in target") {
		t.Fatalf("restore of a missing backup: %v", r.Status)
	}
	if _, err := f.vms.Store.Get(context.Background(), "default", "db-copy"); err == nil {
		t.Fatal("a VM was made")
	}
}

// A backup of another namespace's VM is restored only by a restore a
// cluster-admin made (the server's annotation): an editor of one
// namespace cannot read another's VM through its backups.
func TestRestoreOfAnotherNamespacesBackupNeedsAClusterAdmin(t *testing.T) {
	for _, tc := range []struct {
		name      string
		annotated bool
	}{{"editor's restore", false}, {"cluster-admin's restore", true}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			st, err := repo.OpenDir(f.dir)
			if err != nil {
				t.Fatal(err)
			}
			// The manifest's VM is of namespace prod; the restore is in default.
			m := manifestOf(t, backedUpVM())
			m.Created = f.clock.Now()
			if err := repo.New(st, repo.Options{}).PutManifest(context.Background(), m); err != nil {
				t.Fatal(err)
			}
			r := restoreOf(false)
			if tc.annotated {
				r.Metadata.Annotations = map[string]string{apiv1.AnnotationAnyNamespaceRestore: "true"}
			}
			if _, err := f.restores.Store.Create(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			for range 4 {
				f.sync()
				if _, err := f.rc.Reconcile(context.Background(), "default/r1"); err != nil {
					t.Fatal(err)
				}
			}
			got := f.restores.Get(t, "default", "r1").GetStatus()
			refused := got.GetPhase() == apiv1.BackupFailed && strings.Contains(got.GetError(), `restoring it into namespace "default" needs a restore made by a cluster-admin`)
			if refused == tc.annotated {
				t.Fatalf("restore of prod's backup into default (annotated %v): %v", tc.annotated, got)
			}
		})
	}
}
