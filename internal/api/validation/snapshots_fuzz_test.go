package validation

import (
	"net"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// snapshotSeeds are JSON snapshots, restores and clones, valid and not
// (the fields of one kind are unknown to the others, which then fail to
// parse as JSON: harmless).
var snapshotSeeds = []string{
	`{}`,
	`{"metadata":{"name":"s"},"spec":{"source":"web"}}`,
	`{"metadata":{"name":"s"},"spec":{"source":"web","deletion_policy":"Retain","failure_deadline_seconds":"0"}}`,
	`{"metadata":{"name":"s"},"spec":{"source":"../etc","deletion_policy":"x","failure_deadline_seconds":"-1"}}`,
	`{"metadata":{"name":"r"},"spec":{"target":"web","snapshot":"s","target_readiness_policy":"StopTarget"}}`,
	`{"metadata":{"name":"r"},"spec":{"target":"w2","snapshot":"s","new_identity":true,"mac_addresses":{"default":"02:00:00:00:00:01"},"labels":{"a":"b"}}}`,
	`{"metadata":{"name":"r"},"spec":{"target":"w2","snapshot":"s","mac_addresses":{"Bad Name":"ff:ff:ff:ff:ff:ff"}}}`,
	`{"metadata":{"name":"c"},"spec":{"source_name":"web","target":"web2","new_mac_addresses":{"default":"02:00:00:00:00:02"}}}`,
	`{"metadata":{"name":"c"},"spec":{"source_kind":"VirtualMachineSnapshot","source_name":"s","target":"s","annotations":{"x/y":"z"}}}`,
}

func FuzzValidateSnapshotKinds(f *testing.F) {
	for _, s := range snapshotSeeds {
		f.Add([]byte(s))
	}
	for _, m := range []proto.Message{validSnapshot(), validRestore(), validClone()} {
		for _, marshal := range []func(proto.Message) ([]byte, error){proto.Marshal, protojson.Marshal} {
			b, err := marshal(m)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if s := (&apiv1.VirtualMachineSnapshot{}); unmarshalEither(data, s) {
			checkSnapshot(t, s)
		}
		if r := (&apiv1.VirtualMachineRestore{}); unmarshalEither(data, r) {
			checkRestore(t, r)
		}
		if c := (&apiv1.VirtualMachineClone{}); unmarshalEither(data, c) {
			checkClone(t, c)
		}
		// Statuses are what nodes and controllers send; they must never
		// panic, whatever they hold.
		_ = ValidateSnapshotStatus(statusOf[*apiv1.VirtualMachineSnapshotStatus](data), field.NewPath("status"))
		_ = ValidateSnapshotContentStatus(statusOf[*apiv1.VirtualMachineSnapshotContentStatus](data), field.NewPath("status"))
		_ = ValidateRestoreStatus(statusOf[*apiv1.VirtualMachineRestoreStatus](data), field.NewPath("status"))
		_ = ValidateCloneStatus(statusOf[*apiv1.VirtualMachineCloneStatus](data), field.NewPath("status"))
	})
}

// statusOf is data as a T, or T's zero message when it is none.
func statusOf[T interface {
	proto.Message
	*S
}, S any](data []byte) T {
	var s S
	m := T(&s)
	_ = unmarshalEither(data, m)
	return m
}

// checkDefaulted runs default twice on m (idempotence), then validate
// before and after: a valid object stays valid once defaulted, and every
// error names a field of the object.
func checkDefaulted[T proto.Message](t *testing.T, m T, def func(T), validate func(T) field.ErrorList) field.ErrorList {
	t.Helper()
	raw := validate(m)
	def(m)
	once := proto.Clone(m)
	def(m)
	if !proto.Equal(m, once) {
		t.Fatalf("defaulting is not idempotent:\n once  %v\n twice %v", once, m)
	}
	errs := validate(m)
	checkReplicaErrors(t, raw, errs)
	if len(errs) == 0 && proto.Size(m) > MaxObjectBytes {
		t.Fatal("accepted an object over MaxObjectBytes")
	}
	return errs
}

func checkSnapshot(t *testing.T, s *apiv1.VirtualMachineSnapshot) {
	if len(checkDefaulted(t, s, DefaultSnapshot, ValidateSnapshot)) > 0 {
		return
	}
	// What the controller relies on for every accepted snapshot: a VM name
	// it can look up, a known policy, a deadline it can add to a time.
	sp := s.Spec
	if len(ValidateObjectKey(s.Metadata.Namespace, sp.Source, field.NewPath("k"))) > 0 ||
		(sp.DeletionPolicy != apiv1.DeletionPolicyDelete && sp.DeletionPolicy != apiv1.DeletionPolicyRetain) ||
		(sp.FailureDeadlineSeconds != nil && (*sp.FailureDeadlineSeconds < 0 || *sp.FailureDeadlineSeconds > MaxSnapshotFailureDeadlineSeconds)) {
		t.Fatalf("accepted %v", s)
	}
}

func checkRestore(t *testing.T, r *apiv1.VirtualMachineRestore) {
	if len(checkDefaulted(t, r, DefaultRestore, ValidateRestore)) > 0 {
		return
	}
	sp := r.Spec
	if len(ValidateObjectKey(r.Metadata.Namespace, sp.Target, nil)) > 0 || len(ValidateObjectKey(r.Metadata.Namespace, sp.Snapshot, nil)) > 0 ||
		sp.TargetReadinessPolicy == "" || (len(sp.MacAddresses) > 0 && !sp.NewIdentity) {
		t.Fatalf("accepted %v", r)
	}
	checkMACs(t, sp.MacAddresses)
}

func checkClone(t *testing.T, c *apiv1.VirtualMachineClone) {
	if len(checkDefaulted(t, c, DefaultClone, ValidateClone)) > 0 {
		return
	}
	sp := c.Spec
	if len(ValidateObjectKey(c.Metadata.Namespace, sp.Target, nil)) > 0 || len(ValidateObjectKey(c.Metadata.Namespace, sp.SourceName, nil)) > 0 ||
		(sp.SourceKind == apiv1.CloneSourceVM && sp.Target == sp.SourceName) ||
		(sp.SourceKind != apiv1.CloneSourceVM && sp.SourceKind != apiv1.CloneSourceSnapshot) {
		t.Fatalf("accepted %v", c)
	}
	checkMACs(t, sp.NewMacAddresses)
}

// checkMACs: every accepted MAC address can go into a VM's interface as
// it is, and no two interfaces get the same one.
func checkMACs(t *testing.T, m map[string]string) {
	seen := map[string]bool{}
	for name, mac := range m {
		hw, err := net.ParseMAC(mac)
		if err != nil || len(hw) != 6 || hw[0]&1 != 0 || seen[hw.String()] || len(dns1123Label(name, nil)) > 0 {
			t.Fatalf("accepted MAC %q for %q", mac, name)
		}
		seen[hw.String()] = true
	}
}
