package provider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// The waits of the kinds that are one object each, read and watched by
// name, which run to a final phase: snapshots, restores and a VM's clone.
// The kinds' judges are in snapshot_wait.go, restore_wait.go and
// vm_wait.go.

// namedOps is one of these kinds: its calls, and how its waits judge and
// describe an object.
type namedOps[T metaObject, E any] struct {
	create func(ctx context.Context, o T) (T, error)
	get    func(ctx context.Context, key *apiv1.ObjectKey) (T, error)
	watch  func(ctx context.Context, o *apiv1.WatchOptions) (grpc.ServerStreamingClient[E], error)
	del    func(ctx context.Context, key *apiv1.ObjectKey, o *apiv1.DeleteOptions) error
	// judge decides whether the wait after create is over; describe says
	// what an object is doing.
	judge    func(T) verdict
	describe func(T) string
}

// waitNamed waits until judge says done or fails, or ctx ends
// (waitUntil), for the object key; what names it in logs.
func waitNamed[T metaObject, E any](ctx context.Context, ops namedOps[T, E], what string, key *apiv1.ObjectKey, judge func(T) verdict) (T, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch, notify := notifier()
	notifyOnEvents(wctx, notify, func(ctx context.Context) (grpc.ServerStreamingClient[E], error) {
		return ops.watch(ctx, &apiv1.WatchOptions{Namespace: key.GetNamespace(), Name: key.GetName()})
	})
	return waitUntil(ctx, what, ch, func(ctx context.Context) (T, error) { return ops.get(ctx, key) }, judge)
}

// judgeFinal is the judges' shared order (judgeSnapshot, judgeRestore,
// judgeClone): an object being deleted ends the wait, then one that
// failed, with its error (reason, or "no reason given"), then one done
// is done. state is what describe says of o; short names the kind in the
// error ("the snapshot failed: ...").
func judgeFinal(o metaObject, state, short string, failed bool, reason string, done bool) verdict {
	out := verdict{state: state}
	switch {
	case o.GetMetadata().GetDeletionTimestamp() != nil:
		out.err = errors.New("it is being deleted")
	case failed:
		out.err = fmt.Errorf("the %s failed: %s", short, cmp.Or(reason, "no reason given"))
	case done:
		out.done = true
	}
	return out
}

// deleteNamed deletes the object key if it still has uid ("" skips the
// check) and waits until it is gone: its controller and node remove
// their finalizers once the data they hold is gone. gone reports whether
// it was ours and is gone now; replaced that another object of the same
// name was left alone.
func deleteNamed[T metaObject, E any](ctx context.Context, ops namedOps[T, E], what string, key *apiv1.ObjectKey, uid string) (replaced bool, err error) {
	err = ops.del(ctx, key, &apiv1.DeleteOptions{Uid: uid})
	switch {
	case status.Code(err) == codes.NotFound:
		return false, nil
	case status.Code(err) == codes.FailedPrecondition && uid != "":
		return true, nil
	case err != nil:
		return false, err
	}
	tflog.Info(ctx, what+" deletion requested", map[string]any{"id": apiv1.Ref(key.GetNamespace(), key.GetName())})
	_, err = waitNamed(ctx, ops, what, key, func(o T) verdict {
		if uid != "" && o.GetMetadata().GetUid() != uid {
			return verdict{done: true, state: "replaced"} // ours is gone
		}
		return verdict{state: ops.describe(o)}
	})
	return false, goneWhenNotFound(err)
}

// createNamed is a snapshot's or restore's create once the plan is read:
// it creates want, records it (set) before waiting, so that an
// interrupted apply leaves it tainted rather than forgotten, waits for it
// (ops.judge) and records what it reached. A wait that fails is reported
// (f) and its object deleted again (undoCreate; undo says what deleting
// waits for). fields are logged with the creation.
func createNamed[T metaObject, E any](ctx context.Context, r *configuredResource, resp *resource.CreateResponse, ops namedOps[T, E],
	want T, set func(T), f waitFailure, timeout time.Duration, undo string, fields map[string]any) {
	k := r.kind
	md := want.GetMetadata()
	key := &apiv1.ObjectKey{Namespace: md.GetNamespace(), Name: md.GetName()}
	id := apiv1.Ref(key.Namespace, key.Name)
	created, err := ops.create(ctx, want)
	if err != nil {
		r.addError(&resp.Diagnostics, err, "create "+k.noun+" "+id)
		return
	}
	uid := created.GetMetadata().GetUid()
	log := map[string]any{k.logKey: id, "uid": uid}
	maps.Copy(log, fields)
	tflog.Info(ctx, k.noun+" created", log)
	set(created)
	if resp.Diagnostics.HasError() {
		return
	}
	o, err := waitNamed(ctx, ops, k.noun+" "+id, key, ops.judge)
	if err == nil {
		set(o)
		return
	}
	r.addWaitFailure(&resp.Diagnostics, err, id, f, timeout, "create")
	undoCreate(ctx, r, resp, ops, key, uid, undo)
}

// undoCreate deletes object key (uid), which create made but whose wait
// failed (and was reported), so that the next apply starts afresh, and
// drops it from the state. Deleting gets time of its own when the wait
// used all of create's; slow says what it waits for ("The node removes
// what it copied first"). An object it cannot delete stays in the state,
// tainted: destroy deletes it.
func undoCreate[T metaObject, E any](ctx context.Context, r *configuredResource, resp *resource.CreateResponse, ops namedOps[T, E],
	key *apiv1.ObjectKey, uid string, slow string) {
	k := r.kind
	id := apiv1.Ref(key.GetNamespace(), key.GetName())
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), defaultTimeout)
	defer cancel()
	replaced, err := deleteNamed(dctx, ops, k.noun, key, uid)
	if err != nil {
		r.addDeleteFailure(&resp.Diagnostics, err, false, id, defaultTimeout, slow)
		return
	}
	if !replaced {
		tflog.Info(ctx, "failed "+k.noun+" deleted", map[string]any{k.logKey: id})
	}
	resp.State.RemoveResource(ctx)
}

// readNamed is a snapshot's or restore's Read once the state is read:
// it reads object ns/name (opsOf gives its calls once the provider is
// ready), decides with stillManaged whether the state keeps it, and
// records it (set). id is the state's id, uid its uid.
func readNamed[T metaObject, E any](ctx context.Context, r *configuredResource, req resource.ReadRequest, resp *resource.ReadResponse,
	opsOf func(*client.Client) namedOps[T, E], id, ns, name, uid string, set func(T)) {
	if !r.readyToRefresh(req, resp, "read "+r.kind.noun+" "+id) {
		return
	}
	o, err := opsOf(r.data.client).get(ctx, &apiv1.ObjectKey{Namespace: ns, Name: name})
	if !r.stillManaged(ctx, resp, apiv1.Ref(ns, name), uid, o.GetMetadata().GetUid(), err) {
		return
	}
	set(o)
}

// deleteNamedObject is a snapshot's or restore's Delete once the state is
// read: it deletes object ns/name if it still has uid, within the state's
// delete timeout (limit), and reports what went wrong (addDeleteFailure;
// slow says what deleting waits for).
func deleteNamedObject[T metaObject, E any](ctx context.Context, r *configuredResource, resp *resource.DeleteResponse,
	opsOf func(*client.Client) namedOps[T, E], limit timeoutOf, ns, name, uid, slow string) {
	k := r.kind
	if !r.ready(&resp.Diagnostics, "delete a "+k.noun) {
		return
	}
	timeout, d := limit(ctx, defaultTimeout)
	resp.Diagnostics.Append(d...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	replaced, err := deleteNamed(ctx, opsOf(r.data.client), k.noun, &apiv1.ObjectKey{Namespace: ns, Name: name}, uid)
	r.addDeleteFailure(&resp.Diagnostics, err, replaced, apiv1.Ref(ns, name), timeout, slow)
}

// addDeleteFailure reports a failed deleteNamed of object id of kind k;
// slow says what may take long ("the node removes the snapshot's data").
func (r *configuredResource) addDeleteFailure(diags *diag.Diagnostics, err error, replaced bool, id string, timeout time.Duration, slow string) {
	k := r.kind
	switch {
	case replaced:
		diags.AddWarning(k.title+" "+id+" was replaced outside Terraform",
			"The "+k.short+" Terraform created is already gone; the "+k.short+" now named "+id+
				" was created by someone else and was left alone.")
	case errors.Is(err, errWaitTimeout):
		diags.AddError("Timed out deleting "+k.noun+" "+id,
			fmt.Sprintf("The %s was still there after %s: %s. %s; a node that stopped answering holds it until it "+
				"answers again. Raise timeouts.delete.", k.short, timeout, strings.TrimPrefix(err.Error(), errWaitTimeout.Error()+": "), slow))
	case err != nil:
		r.addError(diags, err, "delete "+k.noun+" "+id)
	}
}

// conditionsText renders the conditions that carry a message, and
// errorText an error, for describe functions.
func conditionsText(conds []*apiv1.Condition) string {
	var out string
	for _, c := range conds {
		if c.GetMessage() != "" {
			out += fmt.Sprintf(", %s=%s (%s): %s", c.GetType(), c.GetStatus(), c.GetReason(), c.GetMessage())
		}
	}
	return out
}

func errorText(e string) string {
	if e == "" {
		return ""
	}
	return ", error: " + e
}
