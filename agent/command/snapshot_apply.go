package command

import (
	"context"
	"fmt"
	"maps"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// applyImmutable is apply's update of a snapshot, restore or clone that
// exists. Their specs are immutable and their services have no update, so
// applying the same manifest again must come out "unchanged" (the object
// is returned as it is, resource version and all) and any other manifest
// is refused. The comparison fills in the defaults the server writes into
// an empty field, or a manifest that leaves them out would never compare
// equal to what was created from it.
func applyImmutable(ctx context.Context, c *client.Client, want object) (object, error) {
	md := want.GetMetadata()
	res, err := lookupResource(kindOf(want))
	if err != nil {
		return nil, err
	}
	have, err := getObject(ctx, c, res, md.GetNamespace(), md.GetName())
	if err != nil {
		return nil, err
	}
	if proto.Equal(withSpecDefaults(specOf(want)), withSpecDefaults(specOf(have))) &&
		maps.Equal(md.GetLabels(), have.GetMetadata().GetLabels()) &&
		maps.Equal(md.GetAnnotations(), have.GetMetadata().GetAnnotations()) {
		return have, nil
	}
	return nil, status.Error(codes.FailedPrecondition, fmt.Sprintf(
		"%s %q exists with another spec, labels or annotations; a %s cannot be changed: delete it and apply again",
		kindOf(want), md.GetName(), res.Singular))
}

// withSpecDefaults is a copy of spec with the server's defaults
// (docs/snapshots.md) in its empty fields.
func withSpecDefaults(spec proto.Message) proto.Message {
	if spec == nil {
		return nil
	}
	spec = proto.Clone(spec)
	switch s := spec.(type) {
	case *apiv1.VirtualMachineSnapshotSpec:
		if s.DeletionPolicy == "" {
			s.DeletionPolicy = apiv1.DeletionPolicyDelete
		}
		if s.FailureDeadlineSeconds == nil {
			s.FailureDeadlineSeconds = proto.Int64(apiv1.DefaultSnapshotFailureDeadlineSeconds)
		}
	case *apiv1.VirtualMachineRestoreSpec:
		if s.TargetReadinessPolicy == "" {
			s.TargetReadinessPolicy = apiv1.ReadinessWaitGracePeriod
		}
	case *apiv1.VirtualMachineCloneSpec:
		if s.SourceKind == "" {
			s.SourceKind = apiv1.CloneSourceVM
		}
	}
	return spec
}
