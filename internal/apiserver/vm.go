package apiserver

import (
	"context"
	"errors"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/macaddr"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// vmTemplateSpecPath is where a VM holds its instance spec.
var vmTemplateSpecPath = field.NewPath("spec", "template", "spec")

type vmService struct {
	apiv1.UnimplementedVirtualMachinesServer
	s *Server
}

// keyOf is the namespace and name a request names an object by, checked
// as stored objects' are (DNS-1123 labels), so that a name no object can
// have is InvalidArgument before it reaches the store.
func keyOf(k *apiv1.ObjectKey) (string, string, error) {
	ns, name := k.GetNamespace(), k.GetName()
	if ns == "" {
		ns = apiv1.DefaultNamespace
	}
	if errs := validation.ValidateObjectKey(ns, name, field.NewPath("key")); len(errs) > 0 {
		return "", "", validation.ToStatusError("ObjectKey", apiv1.Ref(ns, name), errs)
	}
	return ns, name, nil
}

// checkSelector refuses a label selector of a list or watch that is too
// large to match against every object (validation.ValidateLabelSelector).
func checkSelector(s string) error {
	return validation.ToStatusError("LabelSelector", "", validation.ValidateLabelSelector(s, field.NewPath("options", "label_selector")))
}

// getByKey is Get for a namespaced kind (VMs, instances): the key is
// checked before the store is asked.
func getByKey[T store.Object](ctx context.Context, st store.Store[T], key *apiv1.ObjectKey) (T, error) {
	ns, name, err := keyOf(key)
	if err != nil {
		var none T
		return none, err
	}
	out, err := st.Get(ctx, ns, name)
	return out, toStatus(err)
}

// listNamespaced is List for a namespaced kind, a page at a time when the
// options have a limit or a continue token: the selector is checked
// before the store is asked. Authorization checked this request's options
// (a node's selector pins its own node), and every page is a request of
// its own that is checked again and filtered by its own selector: a token
// carries only where to go on and at which revision, no permission.
func listNamespaced[T store.Object](ctx context.Context, st store.Store[T], o *apiv1.ListOptions) (items []T, rev int64, cont string, err error) {
	if err := checkSelector(o.GetLabelSelector()); err != nil {
		return nil, 0, "", err
	}
	p, err := st.ListPage(ctx, listOptions(o), o.GetLimit(), o.GetContinue())
	return p.Items, p.Revision, p.Continue, toStatus(err)
}

func (v *vmService) Create(ctx context.Context, req *apiv1.CreateVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	vm := proto.Clone(req.GetVm()).(*apiv1.VirtualMachine)
	if vm == nil {
		vm = &apiv1.VirtualMachine{}
	}
	validation.DefaultVirtualMachine(vm)
	macaddr.Assign(vm.GetSpec().GetTemplate().GetSpec(), nil)
	if errs := validation.ValidateVirtualMachine(vm, v.s.opts.Validation); len(errs) > 0 {
		return nil, validation.ToStatusError("VirtualMachine", vm.GetMetadata().GetName(), errs)
	}
	if err := v.s.checkImageSizes(ctx, apiv1.KindVirtualMachine, vm.Metadata.Name, vmTemplateSpecPath, vm.Spec.Template.Spec, nil); err != nil {
		return nil, err
	}
	// The server owns these; a client cannot preset them.
	m := vm.Metadata
	vm.Metadata = &apiv1.ObjectMeta{
		Namespace: m.Namespace, Name: m.Name, Labels: m.Labels, Annotations: m.Annotations,
	}
	vm.Status = &apiv1.VirtualMachineStatus{}
	out, err := v.s.stores.VMs.Create(ctx, vm)
	if err != nil {
		return nil, toStatus(err)
	}
	v.s.log.Info("virtual machine created", "vm", m.Namespace+"/"+m.Name, "uid", out.Metadata.Uid)
	return out, nil
}

func (v *vmService) Get(ctx context.Context, req *apiv1.GetVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	return getByKey(ctx, v.s.stores.VMs, req.GetKey())
}

func (v *vmService) List(ctx context.Context, req *apiv1.ListVirtualMachinesRequest) (*apiv1.ListVirtualMachinesResponse, error) {
	items, rev, cont, err := listNamespaced(ctx, v.s.stores.VMs, req.GetOptions())
	if err != nil {
		return nil, err
	}
	return &apiv1.ListVirtualMachinesResponse{Items: items, ResourceVersion: rev, Continue: cont}, nil
}

// Update replaces spec, labels and annotations. The compare-and-swap on
// metadata.resource_version makes concurrent writers lose loudly instead of
// silently overwriting each other.
func (v *vmService) Update(ctx context.Context, req *apiv1.UpdateVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	in := proto.Clone(req.GetVm()).(*apiv1.VirtualMachine)
	if in == nil {
		in = &apiv1.VirtualMachine{}
	}
	validation.DefaultVirtualMachine(in)
	rv := in.GetMetadata().GetResourceVersion()
	if rv == 0 {
		return nil, status.Error(codes.InvalidArgument, "metadata.resource_version: Required value: an update must carry the version it read")
	}
	old, err := v.s.stores.VMs.Get(ctx, in.Metadata.Namespace, in.Metadata.Name)
	if err != nil {
		return nil, toStatus(err)
	}
	if in.Metadata.Uid == "" {
		in.Metadata.Uid = old.Metadata.Uid // not given: this object; a different uid is refused below
	}
	macaddr.Assign(in.GetSpec().GetTemplate().GetSpec(), old.GetSpec().GetTemplate().GetSpec())
	if errs := validation.ValidateVirtualMachine(in, v.s.opts.Validation); len(errs) > 0 {
		return nil, validation.ToStatusError("VirtualMachine", in.Metadata.Name, errs)
	}
	if errs := validation.ValidateVirtualMachineUpdate(in, old, v.s.opts.Validation); len(errs) > 0 {
		return nil, validation.ToStatusError("VirtualMachine", in.Metadata.Name, errs)
	}
	if err := v.s.checkImageSizes(ctx, apiv1.KindVirtualMachine, in.Metadata.Name, vmTemplateSpecPath, in.Spec.Template.Spec, old.GetSpec().GetTemplate().GetSpec()); err != nil {
		return nil, err
	}
	if old.Metadata.ResourceVersion != rv {
		return nil, status.Errorf(codes.Aborted, "virtualmachine %q: %s", in.Metadata.Namespace+"/"+in.Metadata.Name, conflictMessage)
	}
	// Checked on the version the write compares against: a lock taken
	// since fails the write as a conflict, not silently.
	if err := specLocked(old, in.Spec); err != nil {
		return nil, err
	}
	next, changed := withUserChanges(old, in, !proto.Equal(old.Spec, in.Spec),
		func(n *apiv1.VirtualMachine) { n.Spec = in.Spec })
	if !changed {
		return old, nil
	}
	out, err := v.s.stores.VMs.Update(ctx, next)
	return out, toStatus(err)
}

func (v *vmService) Delete(ctx context.Context, req *apiv1.DeleteVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	if req.GetDeleteSnapshots() {
		if err := v.deleteSnapshotsOf(ctx, req.GetKey(), req.GetOptions()); err != nil {
			return nil, err
		}
	}
	out, err := deleteByKey(ctx, v.s.stores.VMs, apiv1.KindVirtualMachine, req.GetKey(), req.GetOptions())
	if err != nil {
		return nil, err
	}
	v.s.log.Info("virtual machine deletion requested", "vm", apiv1.Ref(out.GetMetadata().GetNamespace(), out.GetMetadata().GetName()),
		"delete_snapshots", req.GetDeleteSnapshots())
	return out, nil
}

// deleteSnapshotsOf deletes the snapshots of the VM key names (Delete with
// delete_snapshots), before the VM: those whose status.source_uid is its
// uid, or that have none yet and name it in spec.source. A snapshot of an
// earlier VM of the same name is another VM's and stays. Each delete
// honours the snapshot's finalizers, so the snapshot controller deletes
// the contents and their data (deletion_policy Delete) as on any delete.
// The VM is read first and the options' uid precondition checked, so a
// delete that will fail on the VM deletes no snapshot.
func (v *vmService) deleteSnapshotsOf(ctx context.Context, key *apiv1.ObjectKey, o *apiv1.DeleteOptions) error {
	vm, err := getByKey(ctx, v.s.stores.VMs, key)
	if err != nil {
		return err
	}
	md := vm.GetMetadata()
	if uid := o.GetUid(); uid != "" && uid != md.GetUid() {
		return status.Errorf(codes.Aborted, "virtualmachine %q: uid is %s, precondition %s", apiv1.Ref(md.GetNamespace(), md.GetName()), md.GetUid(), uid)
	}
	snaps, _, err := v.s.stores.Snapshots.List(ctx, store.ListOptions{Namespace: md.GetNamespace()})
	if err != nil {
		return toStatus(err)
	}
	for _, snap := range snaps {
		src := snap.GetStatus().GetSourceUid()
		if src != md.GetUid() && (src != "" || snap.GetSpec().GetSource() != md.GetName()) {
			continue
		}
		sm := snap.GetMetadata()
		// The uid precondition keeps a snapshot made again under the same
		// name since the list (another VM's, maybe) from being deleted.
		_, _, err := v.s.stores.Snapshots.Delete(ctx, sm.GetNamespace(), sm.GetName(), store.DeleteOptions{UID: sm.GetUid()})
		switch {
		case errors.Is(err, store.ErrNotFound):
			continue // deleted meanwhile
		case err != nil:
			return toStatus(err)
		}
		v.s.log.Info("snapshot deletion requested with its VM", "snapshot", apiv1.Ref(sm.GetNamespace(), sm.GetName()), "vm", md.GetName())
	}
	return nil
}

// specLocked refuses a user's change of a VM's spec that a snapshot or a
// restore in progress forbids, in KubeVirt's words (its VM admitter): a
// snapshot holds the run state, disks and volumes still; a restore the
// whole spec, which it is about to replace.
func specLocked(old *apiv1.VirtualMachine, spec *apiv1.VirtualMachineSpec) error {
	was := old.GetSpec()
	wasRunning, wasSet := was.RunningFlag()
	running, set := spec.RunningFlag()
	runState := was.GetRunStrategy() != spec.GetRunStrategy() || wasRunning != running || wasSet != set
	if r := old.GetStatus().GetRestoreInProgress(); r != "" {
		if runState {
			return status.Errorf(codes.FailedPrecondition, "Cannot update VM runStrategy until restore %q completes", r)
		}
		if !proto.Equal(was, spec) {
			return status.Errorf(codes.FailedPrecondition, "Cannot update vm spec until restore %q completes", r)
		}
	}
	if s := old.GetStatus().GetSnapshotInProgress(); s != "" {
		if runState {
			return status.Errorf(codes.FailedPrecondition, "Cannot update vm running state until snapshot %q completes", s)
		}
		wasTmpl, tmpl := was.GetTemplate().GetSpec(), spec.GetTemplate().GetSpec()
		if !listEqual(wasTmpl.GetVolumes(), tmpl.GetVolumes()) || !listEqual(wasTmpl.GetDomain().GetDevices().GetDisks(), tmpl.GetDomain().GetDevices().GetDisks()) {
			return status.Errorf(codes.FailedPrecondition, "Cannot update vm disks or volumes until snapshot %q completes", s)
		}
	}
	return nil
}

// runStateLocked refuses a lifecycle verb that changes vm's run state
// (start, stop, restart) while a snapshot or a restore holds it.
func runStateLocked(vm *apiv1.VirtualMachine) error {
	if s := vm.GetStatus().GetSnapshotInProgress(); s != "" {
		return status.Errorf(codes.FailedPrecondition, "Cannot update vm running state until snapshot %q completes", s)
	}
	if r := vm.GetStatus().GetRestoreInProgress(); r != "" {
		return status.Errorf(codes.FailedPrecondition, "Cannot update VM runStrategy until restore %q completes", r)
	}
	return nil
}

// runStateChecked is decide refused while runStateLocked.
func runStateChecked(decide vmDecision) vmDecision {
	return func(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) (*int64, error) {
		if err := runStateLocked(vm); err != nil {
			return nil, err
		}
		return decide(vm, vmi)
	}
}

// unpauseLocked refuses unpausing vm's instance during a snapshot: an
// online snapshot of a paused VM relies on it staying paused (indication
// Paused), as KubeVirt's unpause subresource does.
func unpauseLocked(vm *apiv1.VirtualMachine) error {
	if s := vm.GetStatus().GetSnapshotInProgress(); s != "" {
		return status.Errorf(codes.FailedPrecondition, "Cannot unpause vm until snapshot %q completes", s)
	}
	return nil
}

// listEqual reports whether two lists of messages are equal element by
// element.
func listEqual[T proto.Message](a, b []T) bool {
	return slices.EqualFunc(a, b, func(x, y T) bool { return proto.Equal(x, y) })
}

// deleteByKey is Delete for a namespaced kind that takes DeleteOptions
// (VMs, replica sets, pools): the key and the uid precondition are
// checked before the store is asked. An object with finalizers gets its
// deletion timestamp and stays until they are removed.
func deleteByKey[T store.Object](ctx context.Context, st store.Store[T], kind string, key *apiv1.ObjectKey, o *apiv1.DeleteOptions) (T, error) {
	var none T
	ns, name, err := keyOf(key)
	if err != nil {
		return none, err
	}
	if uid := o.GetUid(); uid != "" {
		if errs := validation.ValidateUID(uid, field.NewPath("options", "uid")); len(errs) > 0 {
			return none, validation.ToStatusError(kind, name, errs)
		}
	}
	out, _, err := st.Delete(ctx, ns, name, store.DeleteOptions{UID: o.GetUid(), ResourceVersion: o.GetResourceVersion()})
	if err != nil {
		return none, toStatus(err)
	}
	return out, nil
}

func (v *vmService) Watch(req *apiv1.WatchVirtualMachinesRequest, stream apiv1.VirtualMachines_WatchServer) error {
	return streamWatch(stream.Context(), v.s.stores.VMs, req.GetOptions(), func(t apiv1.EventType, o *apiv1.VirtualMachine, rev int64) error {
		return stream.Send(&apiv1.VirtualMachineEvent{Type: t, Object: o, ResourceVersion: rev})
	})
}

// Migrate creates a migration of the VM's instance (KubeVirt's
// `virtctl migrate`); the lifecycle verbs are in verbs.go.
func (v *vmService) Migrate(ctx context.Context, req *apiv1.MigrateVirtualMachineRequest) (*apiv1.VirtualMachineInstanceMigration, error) {
	return v.s.migrateVM(ctx, req)
}
