package validation

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func validSnapshot() *apiv1.VirtualMachineSnapshot {
	return &apiv1.VirtualMachineSnapshot{
		Metadata: &apiv1.ObjectMeta{Name: "snap", Namespace: "prod", Labels: map[string]string{"app": "web"}},
		Spec:     &apiv1.VirtualMachineSnapshotSpec{Source: "web", DeletionPolicy: apiv1.DeletionPolicyRetain, FailureDeadlineSeconds: ptr(int64(600))},
	}
}

func validRestore() *apiv1.VirtualMachineRestore {
	return &apiv1.VirtualMachineRestore{
		Metadata: &apiv1.ObjectMeta{Name: "r", Namespace: "prod"},
		Spec: &apiv1.VirtualMachineRestoreSpec{
			Target: "web-2", Snapshot: "snap", TargetReadinessPolicy: apiv1.ReadinessStopTarget,
			NewIdentity: true, MacAddresses: map[string]string{"default": "02:00:00:00:00:09"},
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"example.com/why": "test"},
		},
	}
}

func validClone() *apiv1.VirtualMachineClone {
	return &apiv1.VirtualMachineClone{
		Metadata: &apiv1.ObjectMeta{Name: "c", Namespace: "prod"},
		Spec: &apiv1.VirtualMachineCloneSpec{
			SourceKind: apiv1.CloneSourceVM, SourceName: "web", Target: "web-2",
			NewMacAddresses: map[string]string{"default": "02:00:00:00:00:0a"},
			Labels:          map[string]string{"app": "web"}, Annotations: map[string]string{"example.com/why": "test"},
		},
	}
}

func TestValidateSnapshot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*apiv1.VirtualMachineSnapshot)
		want   []want
	}{
		{"valid", func(*apiv1.VirtualMachineSnapshot) {}, nil},
		{"no deadline set", func(s *apiv1.VirtualMachineSnapshot) { s.Spec.FailureDeadlineSeconds = nil }, nil},
		{"deadline 0 (none)", func(s *apiv1.VirtualMachineSnapshot) { s.Spec.FailureDeadlineSeconds = ptr(int64(0)) }, nil},
		{"deadline 7 days", func(s *apiv1.VirtualMachineSnapshot) {
			s.Spec.FailureDeadlineSeconds = ptr(int64(MaxSnapshotFailureDeadlineSeconds))
		}, nil},
		{"deadline over 7 days", func(s *apiv1.VirtualMachineSnapshot) {
			s.Spec.FailureDeadlineSeconds = ptr(int64(MaxSnapshotFailureDeadlineSeconds + 1))
		}, []want{invalid("spec.failure_deadline_seconds")}},
		{"negative deadline", func(s *apiv1.VirtualMachineSnapshot) { s.Spec.FailureDeadlineSeconds = ptr(int64(-1)) },
			[]want{invalid("spec.failure_deadline_seconds")}},
		{"no source", func(s *apiv1.VirtualMachineSnapshot) { s.Spec.Source = "" }, []want{required("spec.source")}},
		{"source not a name", func(s *apiv1.VirtualMachineSnapshot) { s.Spec.Source = "../web" }, []want{invalid("spec.source")}},
		{"bad policy", func(s *apiv1.VirtualMachineSnapshot) { s.Spec.DeletionPolicy = "delete" },
			[]want{notSupported("spec.deletion_policy")}},
		{"bad name", func(s *apiv1.VirtualMachineSnapshot) { s.Metadata.Name = "Snap" }, []want{invalid("metadata.name")}},
		{"no namespace", func(s *apiv1.VirtualMachineSnapshot) { s.Metadata.Namespace = "" }, []want{required("metadata.namespace")}},
		{"bad label", func(s *apiv1.VirtualMachineSnapshot) { s.Metadata.Labels = map[string]string{"a b": ""} },
			[]want{invalid("metadata.labels")}},
		{"no metadata", func(s *apiv1.VirtualMachineSnapshot) { s.Metadata = nil }, []want{required("metadata")}},
		{"no spec", func(s *apiv1.VirtualMachineSnapshot) { s.Spec = nil }, []want{required("spec")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := validSnapshot()
			tc.mutate(s)
			expectErrors(t, ValidateSnapshot(s), tc.want...)
		})
	}
}

func TestDefaultSnapshot(t *testing.T) {
	s := &apiv1.VirtualMachineSnapshot{Metadata: &apiv1.ObjectMeta{Name: "s"}, Spec: &apiv1.VirtualMachineSnapshotSpec{Source: "web"}}
	DefaultSnapshot(s)
	if s.Metadata.Namespace != apiv1.DefaultNamespace || s.Spec.DeletionPolicy != apiv1.DeletionPolicyDelete || s.Spec.FailureDeadlineSeconds != nil {
		t.Fatalf("defaulted: %v", s)
	}
	expectErrors(t, ValidateSnapshot(s))
	empty := &apiv1.VirtualMachineSnapshot{}
	DefaultSnapshot(empty)
	expectErrors(t, ValidateSnapshot(empty), required("metadata.name"), required("spec.source"))
}

func TestValidateRestore(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*apiv1.VirtualMachineRestore)
		want   []want
	}{
		{"valid", func(*apiv1.VirtualMachineRestore) {}, nil},
		{"in place", func(r *apiv1.VirtualMachineRestore) { r.Spec.NewIdentity, r.Spec.MacAddresses = false, nil }, nil},
		{"every policy", func(r *apiv1.VirtualMachineRestore) { r.Spec.TargetReadinessPolicy = apiv1.ReadinessWaitEventually }, nil},
		{"no target", func(r *apiv1.VirtualMachineRestore) { r.Spec.Target = "" }, []want{required("spec.target")}},
		{"no snapshot", func(r *apiv1.VirtualMachineRestore) { r.Spec.Snapshot = "" }, []want{required("spec.snapshot")}},
		{"bad names", func(r *apiv1.VirtualMachineRestore) { r.Spec.Target, r.Spec.Snapshot = "a/b", "S" },
			[]want{invalid("spec.target"), invalid("spec.snapshot")}},
		{"bad policy", func(r *apiv1.VirtualMachineRestore) { r.Spec.TargetReadinessPolicy = "Wait" },
			[]want{notSupported("spec.target_readiness_policy")}},
		{"MACs without new identity", func(r *apiv1.VirtualMachineRestore) { r.Spec.NewIdentity = false },
			[]want{forbidden("spec.mac_addresses")}},
		{"multicast MAC", func(r *apiv1.VirtualMachineRestore) { r.Spec.MacAddresses["default"] = "01:00:00:00:00:01" },
			[]want{invalid("spec.mac_addresses[default]")}},
		{"not a MAC", func(r *apiv1.VirtualMachineRestore) { r.Spec.MacAddresses["default"] = "02:00:00:00:00" },
			[]want{invalid("spec.mac_addresses[default]")}},
		{"zero MAC", func(r *apiv1.VirtualMachineRestore) { r.Spec.MacAddresses["default"] = "00:00:00:00:00:00" },
			[]want{invalid("spec.mac_addresses[default]")}},
		{"same MAC twice", func(r *apiv1.VirtualMachineRestore) { r.Spec.MacAddresses["other"] = "02:00:00:00:00:09" },
			[]want{duplicate("spec.mac_addresses[other]")}},
		{"interface not a name", func(r *apiv1.VirtualMachineRestore) {
			r.Spec.MacAddresses = map[string]string{"Eth 0": "02:00:00:00:00:09"}
		}, []want{invalid("spec.mac_addresses")}},
		{"bad label", func(r *apiv1.VirtualMachineRestore) { r.Spec.Labels["a b"] = "x" }, []want{invalid("spec.labels")}},
		{"bad annotation", func(r *apiv1.VirtualMachineRestore) { r.Spec.Annotations["-x"] = "" },
			[]want{invalid("spec.annotations")}},
		{"no spec", func(r *apiv1.VirtualMachineRestore) { r.Spec = nil }, []want{required("spec")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := validRestore()
			tc.mutate(r)
			expectErrors(t, ValidateRestore(r), tc.want...)
		})
	}
	r := &apiv1.VirtualMachineRestore{Metadata: &apiv1.ObjectMeta{Name: "r"}, Spec: &apiv1.VirtualMachineRestoreSpec{Target: "a", Snapshot: "b"}}
	DefaultRestore(r)
	if r.Spec.TargetReadinessPolicy != apiv1.ReadinessWaitGracePeriod || r.Metadata.Namespace != apiv1.DefaultNamespace {
		t.Fatalf("defaulted: %v", r)
	}
	expectErrors(t, ValidateRestore(r))
}

func TestValidateClone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*apiv1.VirtualMachineClone)
		want   []want
	}{
		{"valid", func(*apiv1.VirtualMachineClone) {}, nil},
		{"from a snapshot of the same name", func(c *apiv1.VirtualMachineClone) {
			c.Spec.SourceKind, c.Spec.SourceName = apiv1.CloneSourceSnapshot, "web-2"
		}, nil},
		{"target is the source VM", func(c *apiv1.VirtualMachineClone) { c.Spec.Target = "web" },
			[]want{invalid("spec.target")}},
		{"bad kind", func(c *apiv1.VirtualMachineClone) { c.Spec.SourceKind = "VM" }, []want{notSupported("spec.source_kind")}},
		{"no source", func(c *apiv1.VirtualMachineClone) { c.Spec.SourceName = "" }, []want{required("spec.source_name")}},
		{"no target", func(c *apiv1.VirtualMachineClone) { c.Spec.Target = "" }, []want{required("spec.target")}},
		{"bad target", func(c *apiv1.VirtualMachineClone) { c.Spec.Target = "web_2" }, []want{invalid("spec.target")}},
		{"bad MAC", func(c *apiv1.VirtualMachineClone) { c.Spec.NewMacAddresses["default"] = "03:00:00:00:00:01" },
			[]want{invalid("spec.new_mac_addresses[default]")}},
		{"too many MACs", func(c *apiv1.VirtualMachineClone) {
			for i := range MaxDevices {
				c.Spec.NewMacAddresses["n"+strings.Repeat("x", i)] = "02:00:00:00:01:01"
			}
		}, []want{tooMany("spec.new_mac_addresses")}},
		{"bad label", func(c *apiv1.VirtualMachineClone) { c.Spec.Labels["x"] = "a b" }, []want{invalid("spec.labels[x]")}},
		{"no spec", func(c *apiv1.VirtualMachineClone) { c.Spec = nil }, []want{required("spec")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validClone()
			tc.mutate(c)
			expectErrors(t, ValidateClone(c), tc.want...)
		})
	}
	c := &apiv1.VirtualMachineClone{Metadata: &apiv1.ObjectMeta{Name: "c"}, Spec: &apiv1.VirtualMachineCloneSpec{SourceName: "a", Target: "a"}}
	DefaultClone(c)
	if c.Spec.SourceKind != apiv1.CloneSourceVM {
		t.Fatalf("defaulted: %v", c)
	}
	// The default kind is a VM, so the target may not be its name.
	expectErrors(t, ValidateClone(c), invalid("spec.target"))
}

func TestValidateSnapshotStatuses(t *testing.T) {
	p := field.NewPath("status")
	uid := "6f1c2a3e-0000-4000-8000-000000000001"
	good := &apiv1.VirtualMachineSnapshotContentStatus{
		Phase: apiv1.SnapshotSucceeded, ReadyToUse: true, Indications: []string{apiv1.IndicationOnline, apiv1.IndicationGuestAgent},
		VolumeBackups: []*apiv1.VolumeBackup{{VolumeName: "data", Path: "/var/lib/virtplane/snapshots/" + uid + "/data.qcow2", SizeBytes: 1, VirtualSizeBytes: 2}},
		Message:       "copying volume data (1/1)\n",
	}
	expectErrors(t, ValidateSnapshotContentStatus(good, p))
	bad := proto.Clone(good).(*apiv1.VirtualMachineSnapshotContentStatus)
	bad.Phase = "Done"
	bad.Indications = []string{"Frozen"}
	bad.VolumeBackups = append(bad.VolumeBackups,
		&apiv1.VolumeBackup{VolumeName: "data", Path: "relative/x.qcow2", SizeBytes: -1},
		&apiv1.VolumeBackup{VolumeName: "x", Path: "/a/../etc/shadow", VirtualSizeBytes: -1},
		nil)
	bad.Error = "a\x00b"
	expectErrors(t, ValidateSnapshotContentStatus(bad, p),
		notSupported("status.phase"), notSupported("status.indications[0]"), invalid("status.error"),
		duplicate("status.volume_backups[1].volume_name"), invalid("status.volume_backups[1].path"),
		invalid("status.volume_backups[1].size_bytes"), invalid("status.volume_backups[2].path"),
		invalid("status.volume_backups[2].virtual_size_bytes"), required("status.volume_backups[3]"))

	snap := &apiv1.VirtualMachineSnapshotStatus{
		Phase: apiv1.SnapshotInProgress, SourceUid: uid, ContentName: apiv1.SnapshotContentName(uid), NodeName: "node-a.example",
		IncludedVolumes: []string{"data"}, ExcludedVolumes: []string{"root", "cloudinit"},
		Conditions: []*apiv1.Condition{{Type: "Progressing", Status: apiv1.ConditionFalse, Reason: "Waiting", Message: "Source not locked"}},
	}
	expectErrors(t, ValidateSnapshotStatus(snap, p))
	snap.SourceUid, snap.IncludedVolumes, snap.Conditions[0].Status = "x", []string{"../d"}, "Maybe"
	expectErrors(t, ValidateSnapshotStatus(snap, p), invalid("status.source_uid"), invalid("status.included_volumes[0]"),
		notSupported("status.conditions[0].status"))

	rs := &apiv1.VirtualMachineRestoreStatus{Phase: apiv1.RestoreStaging, TargetUid: uid, NodeName: "n",
		Restores: []*apiv1.VolumeRestore{{VolumeName: "data", SourcePath: "/s/data.qcow2"}}}
	expectErrors(t, ValidateRestoreStatus(rs, p))
	rs.Phase, rs.Restores[0].SourcePath = "Staged", ""
	expectErrors(t, ValidateRestoreStatus(rs, p), notSupported("status.phase"), required("status.restores[0].source_path"))

	// Copies on storage classes: an RBD snapshot has no path, a file on
	// a shared filesystem has one.
	onClasses := &apiv1.VirtualMachineSnapshotContentStatus{VolumeBackups: []*apiv1.VolumeBackup{
		{VolumeName: "root", StorageClass: "ceph", RbdSnapshot: "vp/vm-" + uid + "-vol-root@snap-" + uid, VirtualSizeBytes: 1},
		{VolumeName: "data", StorageClass: "nfs", Path: "/mnt/nfs/virtplane/snapshots/" + uid + "/data.qcow2"},
	}}
	expectErrors(t, ValidateSnapshotContentStatus(onClasses, p))
	onClasses.VolumeBackups = append(onClasses.VolumeBackups,
		&apiv1.VolumeBackup{VolumeName: "a", RbdSnapshot: "vp/img@s"},
		&apiv1.VolumeBackup{VolumeName: "b", StorageClass: "ceph", RbdSnapshot: "vp/img@s", Path: "/x"},
		&apiv1.VolumeBackup{VolumeName: "c", StorageClass: "Ceph_1", RbdSnapshot: "vp/img"},
		&apiv1.VolumeBackup{VolumeName: "d", StorageClass: "local", RbdSnapshot: "vp/i mg@s"},
		&apiv1.VolumeBackup{VolumeName: "e", StorageClass: "nfs"})
	expectErrors(t, ValidateSnapshotContentStatus(onClasses, p),
		required("status.volume_backups[2].storage_class"), invalid("status.volume_backups[3].path"),
		invalid("status.volume_backups[4].storage_class"), invalid("status.volume_backups[4].rbd_snapshot"),
		invalid("status.volume_backups[5].storage_class"), invalid("status.volume_backups[5].rbd_snapshot"),
		required("status.volume_backups[6].path"))
	rs.Phase, rs.Restores = apiv1.RestoreStaging, []*apiv1.VolumeRestore{{VolumeName: "root", StorageClass: "ceph", RbdSnapshot: "vp/img@s"}}
	expectErrors(t, ValidateRestoreStatus(rs, p))
	rs.Restores[0].RbdSnapshot = "vp/img@s:conf=/etc/x"
	expectErrors(t, ValidateRestoreStatus(rs, p), invalid("status.restores[0].rbd_snapshot"))

	cs := &apiv1.VirtualMachineCloneStatus{Phase: apiv1.CloneSnapshotInProgress, SnapshotName: apiv1.CloneSnapshotName(uid), TargetUid: uid}
	expectErrors(t, ValidateCloneStatus(cs, p))
	cs.RestoreName = "Bad"
	expectErrors(t, ValidateCloneStatus(cs, p), invalid("status.restore_name"))
}

// Issue 33 (defect 7): every name a snapshot, restore or clone gives is a
// name in its own namespace, never a path or a reference into another
// namespace: "other/web" or "../other" are refused at the field.
func TestSnapshotKindsNamesAreNoPathsOrNamespaces(t *testing.T) {
	for _, bad := range []string{"other/web", "../other", "..", ".", "web/..", "/web", "other:web"} {
		s := validSnapshot()
		s.Spec.Source = bad
		expectErrors(t, ValidateSnapshot(s), invalid("spec.source"))
		r := validRestore()
		r.Spec.Target, r.Spec.Snapshot = bad, bad
		expectErrors(t, ValidateRestore(r), invalid("spec.target"), invalid("spec.snapshot"))
		c := validClone()
		c.Spec.SourceName, c.Spec.Target = bad, bad+"x"
		expectErrors(t, ValidateClone(c), invalid("spec.source_name"), invalid("spec.target"))
		for _, meta := range []*apiv1.ObjectMeta{s.Metadata, r.Metadata, c.Metadata} {
			meta.Name = bad
		}
		s.Spec.Source, r.Spec.Target, r.Spec.Snapshot, c.Spec.SourceName, c.Spec.Target = "web", "web-2", "snap", "web", "web-2"
		expectErrors(t, ValidateSnapshot(s), invalid("metadata.name"))
		expectErrors(t, ValidateRestore(r), invalid("metadata.name"))
		expectErrors(t, ValidateClone(c), invalid("metadata.name"))
	}
}
