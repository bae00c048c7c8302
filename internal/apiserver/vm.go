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
	objects[*apiv1.VirtualMachine, *apiv1.ListVirtualMachinesResponse, apiv1.VirtualMachineEvent]
	s *Server
}

func newVMService(s *Server) apiv1.VirtualMachinesServer {
	return &vmService{s: s, objects: objects[*apiv1.VirtualMachine, *apiv1.ListVirtualMachinesResponse, apiv1.VirtualMachineEvent]{
		st: s.stores.VMs, log: s.log, kind: apiv1.KindVirtualMachine, noun: "virtual machine", attr: "vm",
		listResponse: func(p store.Page[*apiv1.VirtualMachine]) *apiv1.ListVirtualMachinesResponse {
			return &apiv1.ListVirtualMachinesResponse{Items: p.Items, ResourceVersion: p.Revision, Continue: p.Continue}
		},
		event: func(t apiv1.EventType, o *apiv1.VirtualMachine, rev int64) *apiv1.VirtualMachineEvent {
			return &apiv1.VirtualMachineEvent{Type: t, Object: o, ResourceVersion: rev}
		},
	}}
}

func (v *vmService) Create(ctx context.Context, req *apiv1.CreateVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	vm := requestCopy(req.GetVm())
	validation.DefaultVirtualMachine(vm)
	macaddr.Assign(vm.GetSpec().GetTemplate().GetSpec(), nil)
	if errs := validation.ValidateVirtualMachine(vm, v.s.opts.Validation); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindVirtualMachine, vm.GetMetadata().GetName(), errs)
	}
	if err := v.s.checkVolumes(ctx, apiv1.KindVirtualMachine, vm.Metadata.Name, vmTemplateSpecPath, vm.Spec.Template.Spec, nil); err != nil {
		return nil, err
	}
	if err := v.s.checkNamespaceAllowed(ctx, apiv1.KindVirtualMachine, vm.Metadata.Namespace, vm.Metadata.Name, vmTemplateSpecPath, vm.Spec.Template.Spec); err != nil {
		return nil, err
	}
	if err := checkServerOwnedAnnotations(vm, nil); err != nil {
		return nil, err
	}
	// The server owns the rest of metadata and the status; a client
	// cannot preset them.
	vm.Metadata = userMeta(vm.Metadata)
	vm.Status = &apiv1.VirtualMachineStatus{}
	return v.create(ctx, vm)
}

func (v *vmService) Get(ctx context.Context, req *apiv1.GetVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	return v.get(ctx, req.GetKey())
}

func (v *vmService) List(ctx context.Context, req *apiv1.ListVirtualMachinesRequest) (*apiv1.ListVirtualMachinesResponse, error) {
	return v.list(ctx, req.GetOptions())
}

// Update replaces spec, labels and annotations. The compare-and-swap on
// metadata.resource_version makes concurrent writers lose loudly instead of
// silently overwriting each other.
func (v *vmService) Update(ctx context.Context, req *apiv1.UpdateVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	in := requestCopy(req.GetVm())
	validation.DefaultVirtualMachine(in)
	if in.GetMetadata().GetResourceVersion() == 0 {
		return nil, errNoResourceVersion
	}
	// Read by the name as sent, not by a checked key (objects.update
	// checks it): for a name no VM can have the store answers.
	old, err := v.st.Get(ctx, in.Metadata.Namespace, in.Metadata.Name)
	if err != nil {
		return nil, toStatus(err)
	}
	if in.Metadata.Uid == "" {
		in.Metadata.Uid = old.Metadata.Uid // not given: this object; a different uid is refused below
	}
	macaddr.Assign(in.GetSpec().GetTemplate().GetSpec(), old.GetSpec().GetTemplate().GetSpec())
	if errs := validation.ValidateVirtualMachine(in, v.s.opts.Validation); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindVirtualMachine, in.Metadata.Name, errs)
	}
	if errs := validation.ValidateVirtualMachineUpdate(in, old, v.s.opts.Validation); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindVirtualMachine, in.Metadata.Name, errs)
	}
	if err := v.s.checkVolumes(ctx, apiv1.KindVirtualMachine, in.Metadata.Name, vmTemplateSpecPath, in.Spec.Template.Spec, old.GetSpec().GetTemplate().GetSpec()); err != nil {
		return nil, err
	}
	if err := v.s.checkNamespaceAllowed(ctx, apiv1.KindVirtualMachine, in.Metadata.Namespace, in.Metadata.Name, vmTemplateSpecPath, in.Spec.Template.Spec); err != nil {
		return nil, err
	}
	if err := checkServerOwnedAnnotations(in, old); err != nil {
		return nil, err
	}
	if stale(old, in.Metadata) {
		return nil, conflict(apiv1.KindVirtualMachine, apiv1.Ref(in.Metadata.Namespace, in.Metadata.Name))
	}
	// Checked on the version the write compares against: a lock taken
	// since fails the write as a conflict, not silently.
	if err := specLocked(old, in.Spec); err != nil {
		return nil, err
	}
	next, changed := withUserChanges(old, in, func(n *apiv1.VirtualMachine) bool { return replaceSpec(&n.Spec, in.Spec) })
	if !changed {
		return old, nil
	}
	out, err := v.st.Update(ctx, next)
	return out, toStatus(err)
}

func (v *vmService) Delete(ctx context.Context, req *apiv1.DeleteVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	if req.GetDeleteSnapshots() {
		if err := v.deleteSnapshotsOf(ctx, req.GetKey(), req.GetOptions()); err != nil {
			return nil, err
		}
	}
	return v.delete(ctx, req.GetKey(), req.GetOptions(), "delete_snapshots", req.GetDeleteSnapshots())
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
	vm, err := v.get(ctx, key)
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

func (v *vmService) Watch(req *apiv1.WatchVirtualMachinesRequest, stream apiv1.VirtualMachines_WatchServer) error {
	return v.watch(req.GetOptions(), stream)
}

// Migrate creates a migration of the VM's instance (KubeVirt's
// `virtctl migrate`); the lifecycle verbs are in verbs.go.
func (v *vmService) Migrate(ctx context.Context, req *apiv1.MigrateVirtualMachineRequest) (*apiv1.VirtualMachineInstanceMigration, error) {
	return v.s.migrateVM(ctx, req)
}
