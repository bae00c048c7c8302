package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Updates by compare-and-swap, as every resource that writes an object a
// controller or node also writes (its status) does them.

// metaObject is a stored API object: updateCAS needs its uid.
type metaObject interface {
	proto.Message
	GetMetadata() *apiv1.ObjectMeta
}

// replacedError says the stored object is not the one the state records:
// ours was deleted and another of the same name created.
type replacedError struct {
	what     string // "virtual machine default/web", "image debian": also names the calls in casCallError
	stateUID string
	gotUID   string
}

func (e *replacedError) Error() string {
	return fmt.Sprintf("%s was replaced: the state has uid %s, the agent uid %s", e.what, e.stateUID, e.gotUID)
}

// casCallError is a failed agent call. call says which one, as the verb
// phrase of the caller's diagnostic ("read image debian before updating
// it", "update image debian").
type casCallError struct {
	call string
	err  error
}

func (e *casCallError) Error() string { return e.call + ": " + e.err.Error() }
func (e *casCallError) Unwrap() error { return e.err }

// updateCAS writes merge(stored) by compare-and-swap. Controllers and nodes
// write an object's status concurrently, so a conflict (codes.Aborted) is
// normal: each attempt re-reads and re-applies the plan onto what is
// stored, up to maxConflictRetries attempts. An empty stateUID (an import
// that has not read the uid yet) skips the uid check.
//
// It returns the stored object and whether it wrote one: nothing is written
// when the merge changes nothing. Errors are *replacedError for a uid other
// than stateUID and *casCallError for a failed read or write (wrapping the
// gRPC error).
func updateCAS[T metaObject](ctx context.Context, what, stateUID string,
	get func(context.Context) (T, error), merge func(cur T) T, update func(context.Context, T) (T, error),
) (stored T, written bool, err error) {
	var zero T
	for attempt := 1; ; attempt++ {
		cur, err := get(ctx)
		if err != nil {
			return zero, false, &casCallError{call: "read " + what + " before updating it", err: err}
		}
		if got := cur.GetMetadata().GetUid(); stateUID != "" && got != stateUID {
			return zero, false, &replacedError{what: what, stateUID: stateUID, gotUID: got}
		}
		next := merge(cur)
		if proto.Equal(next, cur) {
			return cur, false, nil
		}
		stored, err := update(ctx, next)
		if status.Code(err) == codes.Aborted && attempt < maxConflictRetries {
			tflog.Debug(ctx, "update conflicted with another writer; retrying", map[string]any{"object": what, "attempt": attempt})
			continue
		}
		if err != nil {
			return zero, false, &casCallError{call: "update " + what, err: err}
		}
		return stored, true, nil
	}
}

// addCASError reports an error from updateCAS about object id of kind k
// and says whether there was one. addError words a failed call.
func addCASError(diags *diag.Diagnostics, err error, k objectKind, id string, addError func(*diag.Diagnostics, error, string)) bool {
	if err == nil {
		return false
	}
	var rep *replacedError
	if errors.As(err, &rep) {
		diags.AddError(k.title+" "+id+" was replaced outside Terraform",
			fmt.Sprintf("The %s Terraform manages (uid %s) was deleted and another %s of the same name (uid %s) exists; "+
				"Terraform does not update %s it did not create. Refresh to drop the old one from the state.",
				k.short, rep.stateUID, k.short, rep.gotUID, k.one))
		return true
	}
	// updateCAS wraps every failed call; "update" only guards a future
	// error that is not wrapped.
	call := "update"
	var failed *casCallError
	if errors.As(err, &failed) {
		call, err = failed.call, failed.err
	}
	addError(diags, err, call)
	return true
}

// maxConflictRetries bounds compare-and-swap retries of one update: the VM
// controller writes status concurrently, which conflicts with our writes.
const maxConflictRetries = 20
