package command

import (
	"context"
	"fmt"
	"maps"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// applyImmutable is apply's update of an object of res (a snapshot,
// restore or clone: a kind with specDefaults) that exists. Their specs are
// immutable and their services have no update, so applying the same
// manifest again must come out "unchanged" (the object is returned as it
// is, resource version and all) and any other manifest is refused. The
// comparison fills in the defaults the server writes into an empty field,
// or a manifest that leaves them out would never compare equal to what
// was created from it.
func applyImmutable(ctx context.Context, c *client.Client, res *resource, want object) (object, error) {
	md := want.GetMetadata()
	have, err := getObject(ctx, c, res, md.GetNamespace(), md.GetName())
	if err != nil {
		return nil, err
	}
	if proto.Equal(withSpecDefaults(res, want), withSpecDefaults(res, have)) &&
		maps.Equal(md.GetLabels(), have.GetMetadata().GetLabels()) &&
		maps.Equal(md.GetAnnotations(), have.GetMetadata().GetAnnotations()) {
		return have, nil
	}
	return nil, status.Error(codes.FailedPrecondition, fmt.Sprintf(
		"%s %q exists with another spec, labels or annotations; a %s cannot be changed: delete it and apply again",
		kindOf(want), md.GetName(), res.Singular))
}

// withSpecDefaults is the spec of obj (of res) with the server's defaults
// (res's specDefaults, docs/snapshots.md) in its empty fields, nil when
// obj has no spec.
func withSpecDefaults(res *resource, obj object) proto.Message {
	if specOf(obj) == nil {
		return nil
	}
	obj = proto.Clone(obj).(object)
	res.calls.specDefaults(obj)
	return specOf(obj)
}
