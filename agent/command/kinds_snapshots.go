package command

import (
	"context"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// The kinds of snapshots_service.proto. Snapshots, their contents,
// restores and clones (docs/snapshots.md) are made by `snapshot create`,
// `restore` and `clone`, or applied. The specs of snapshots, restores and
// clones cannot change: apply creates them, and applying one again is
// "unchanged" or refused (applyImmutable), with the server's defaults
// (specDefaults) filled in before comparing.

var snapshotResource = kind[*apiv1.VirtualMachineSnapshot, *apiv1.SnapshotEvent]{
	resource: resource{
		Kind: apiv1.KindSnapshot, Singular: "virtualmachinesnapshot", Namespaced: true,
		// KubeVirt's names and short names (vmsnapshot, vmsnap), and the
		// plain words.
		names: []string{"vmsnapshot", "vmsnapshots", "vmsnap", "vmsnaps", "snapshot", "snapshots",
			"virtualmachinesnapshot", "virtualmachinesnapshots"},
		columns: []string{"NAME", "SOURCE", "PHASE", "READY", "INDICATIONS", "CREATED", "NODE", "AGE"},
		// The volumes a snapshot copied and left out.
		wideColumns: []string{"INCLUDED", "EXCLUDED"},
	},
	row: func(s *apiv1.VirtualMachineSnapshot, now time.Time) []string {
		st := s.GetStatus()
		return []string{
			s.GetMetadata().GetName(),
			cell(s.GetSpec().GetSource()),
			snapshotPhase(s),
			boolString(st.GetReadyToUse()),
			cell(strings.Join(st.GetIndications(), ",")),
			timestampCell(st.GetCreationTime()),
			cell(st.GetNodeName()),
			age(s.GetMetadata().GetCreationTimestamp(), now),
		}
	},
	wide: func(s *apiv1.VirtualMachineSnapshot) []string {
		return []string{cell(strings.Join(s.GetStatus().GetIncludedVolumes(), ",")), cell(strings.Join(s.GetStatus().GetExcludedVolumes(), ","))}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineSnapshot, error) {
		return c.Snapshots.Get(ctx, &apiv1.GetSnapshotRequest{Key: key})
	},
	list: paged(func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) (*apiv1.ListSnapshotsResponse, error) {
		return c.Snapshots.List(ctx, &apiv1.ListSnapshotsRequest{Options: o})
	}),
	watch: func(ctx context.Context, c *client.Client, o *apiv1.WatchOptions) (client.Stream[*apiv1.SnapshotEvent], error) {
		return c.Snapshots.Watch(ctx, &apiv1.WatchSnapshotsRequest{Options: o})
	},
	create: func(ctx context.Context, c *client.Client, s *apiv1.VirtualMachineSnapshot) (*apiv1.VirtualMachineSnapshot, error) {
		return c.Snapshots.Create(ctx, &apiv1.CreateSnapshotRequest{Snapshot: s})
	},
	specDefaults: func(s *apiv1.VirtualMachineSnapshot) {
		validation.DefaultSnapshot(s)
		// The server leaves it unset (the controller reads unset as the
		// default), so a manifest that writes the default is the same.
		if s.Spec.FailureDeadlineSeconds == nil {
			s.Spec.FailureDeadlineSeconds = proto.Int64(apiv1.DefaultSnapshotFailureDeadlineSeconds)
		}
	},
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineSnapshot, error) {
		return c.Snapshots.Delete(ctx, &apiv1.DeleteSnapshotRequest{Key: key})
	},
}.define()

var snapshotContentResource = kind[*apiv1.VirtualMachineSnapshotContent, *apiv1.SnapshotContentEvent]{
	resource: resource{
		Kind: apiv1.KindSnapshotContent, Singular: "virtualmachinesnapshotcontent", Namespaced: true,
		names: []string{"vmsnapshotcontent", "vmsnapshotcontents", "snapshotcontent", "snapshotcontents",
			"virtualmachinesnapshotcontent", "virtualmachinesnapshotcontents"},
		columns: []string{"NAME", "SNAPSHOT", "NODE", "PHASE", "READY", "VOLUMES", "AGE"},
	},
	row: func(sc *apiv1.VirtualMachineSnapshotContent, now time.Time) []string {
		st := sc.GetStatus()
		phase := st.GetPhase()
		if phase == "" {
			phase = "Pending"
		}
		return []string{
			sc.GetMetadata().GetName(),
			cell(sc.GetSpec().GetSnapshotName()),
			cell(sc.GetSpec().GetNodeName()),
			phase,
			boolString(st.GetReadyToUse()),
			strconv.Itoa(len(sc.GetSpec().GetVolumes())),
			age(sc.GetMetadata().GetCreationTimestamp(), now),
		}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineSnapshotContent, error) {
		return c.SnapshotContents.Get(ctx, &apiv1.GetSnapshotContentRequest{Key: key})
	},
	list: paged(func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) (*apiv1.ListSnapshotContentsResponse, error) {
		return c.SnapshotContents.List(ctx, &apiv1.ListSnapshotContentsRequest{Options: o})
	}),
	watch: func(ctx context.Context, c *client.Client, o *apiv1.WatchOptions) (client.Stream[*apiv1.SnapshotContentEvent], error) {
		return c.SnapshotContents.Watch(ctx, &apiv1.WatchSnapshotContentsRequest{Options: o})
	},
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineSnapshotContent, error) {
		return c.SnapshotContents.Delete(ctx, &apiv1.DeleteSnapshotContentRequest{Key: key})
	},
}.define()

var restoreResource = kind[*apiv1.VirtualMachineRestore, *apiv1.RestoreEvent]{
	resource: resource{
		Kind: apiv1.KindRestore, Singular: "virtualmachinerestore", Namespaced: true,
		names: []string{"vmrestore", "vmrestores", "restore", "restores",
			"virtualmachinerestore", "virtualmachinerestores"},
		columns: []string{"NAME", "TARGET", "SNAPSHOT", "PHASE", "COMPLETE", "RESTORED", "AGE"},
		// The node a restore copies on.
		wideColumns: []string{"NODE"},
	},
	row: func(r *apiv1.VirtualMachineRestore, now time.Time) []string {
		st := r.GetStatus()
		return []string{
			r.GetMetadata().GetName(),
			cell(r.GetSpec().GetTarget()),
			cell(r.GetSpec().GetSnapshot()),
			restorePhase(r),
			boolString(st.GetComplete()),
			timestampCell(st.GetRestoreTime()),
			age(r.GetMetadata().GetCreationTimestamp(), now),
		}
	},
	wide: func(r *apiv1.VirtualMachineRestore) []string {
		return []string{cell(r.GetStatus().GetNodeName())}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineRestore, error) {
		return c.Restores.Get(ctx, &apiv1.GetRestoreRequest{Key: key})
	},
	list: paged(func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) (*apiv1.ListRestoresResponse, error) {
		return c.Restores.List(ctx, &apiv1.ListRestoresRequest{Options: o})
	}),
	watch: func(ctx context.Context, c *client.Client, o *apiv1.WatchOptions) (client.Stream[*apiv1.RestoreEvent], error) {
		return c.Restores.Watch(ctx, &apiv1.WatchRestoresRequest{Options: o})
	},
	create: func(ctx context.Context, c *client.Client, r *apiv1.VirtualMachineRestore) (*apiv1.VirtualMachineRestore, error) {
		return c.Restores.Create(ctx, &apiv1.CreateRestoreRequest{Restore: r})
	},
	specDefaults: validation.DefaultRestore,
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineRestore, error) {
		return c.Restores.Delete(ctx, &apiv1.DeleteRestoreRequest{Key: key})
	},
}.define()

var cloneResource = kind[*apiv1.VirtualMachineClone, *apiv1.CloneEvent]{
	resource: resource{
		Kind: apiv1.KindClone, Singular: "virtualmachineclone", Namespaced: true,
		names: []string{"vmclone", "vmclones", "clone", "clones",
			"virtualmachineclone", "virtualmachineclones"},
		columns: []string{"NAME", "SOURCE", "TARGET", "PHASE", "AGE"},
		// The snapshot and restore a clone made.
		wideColumns: []string{"SNAPSHOT", "RESTORE"},
	},
	row: func(cl *apiv1.VirtualMachineClone, now time.Time) []string {
		spec := cl.GetSpec()
		source := "vm/" + spec.GetSourceName()
		if spec.GetSourceKind() == apiv1.CloneSourceSnapshot {
			source = "vmsnapshot/" + spec.GetSourceName()
		}
		return []string{
			cl.GetMetadata().GetName(),
			source,
			cell(spec.GetTarget()),
			clonePhase(cl),
			age(cl.GetMetadata().GetCreationTimestamp(), now),
		}
	},
	wide: func(cl *apiv1.VirtualMachineClone) []string {
		return []string{cell(cl.GetStatus().GetSnapshotName()), cell(cl.GetStatus().GetRestoreName())}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineClone, error) {
		return c.Clones.Get(ctx, &apiv1.GetCloneRequest{Key: key})
	},
	list: paged(func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) (*apiv1.ListClonesResponse, error) {
		return c.Clones.List(ctx, &apiv1.ListClonesRequest{Options: o})
	}),
	watch: func(ctx context.Context, c *client.Client, o *apiv1.WatchOptions) (client.Stream[*apiv1.CloneEvent], error) {
		return c.Clones.Watch(ctx, &apiv1.WatchClonesRequest{Options: o})
	},
	create: func(ctx context.Context, c *client.Client, cl *apiv1.VirtualMachineClone) (*apiv1.VirtualMachineClone, error) {
		return c.Clones.Create(ctx, &apiv1.CreateCloneRequest{Clone: cl})
	},
	specDefaults: validation.DefaultClone,
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineClone, error) {
		return c.Clones.Delete(ctx, &apiv1.DeleteCloneRequest{Key: key})
	},
}.define()
