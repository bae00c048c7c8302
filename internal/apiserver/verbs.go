package apiserver

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/vmlifecycle"
)

// The lifecycle verbs. What each one does is decided by internal/vmlifecycle
// (KubeVirt's pkg/virt-api/rest/lifecycle.go); this file reads the VM and
// its instance and writes the result with compare-and-swap, so the VM
// controller's concurrent status writes are neither lost nor overwritten.

// lifecycleMethods are the full method names of the lifecycle verbs and
// Migrate: users' writes to a VM's run state, which a namespace's editors
// may make (methodRules) and a nearly full store refuses (quotaGuarded).
var lifecycleMethods = []string{
	apiv1.VirtualMachines_Start_FullMethodName,
	apiv1.VirtualMachines_Stop_FullMethodName,
	apiv1.VirtualMachines_Restart_FullMethodName,
	apiv1.VirtualMachines_Pause_FullMethodName,
	apiv1.VirtualMachines_Unpause_FullMethodName,
	apiv1.VirtualMachines_Migrate_FullMethodName,
}

// errInstanceChanged: the instance a decision was made on was deleted or
// replaced before the write. Aborted tells clients to retry, which then
// decides on the new state.
var errInstanceChanged = status.Error(codes.Aborted, "the virtual machine's instance changed while the request was processed; retry")

// errVMReplaced: the VM was deleted and re-created under the same name
// between the read and the write.
var errVMReplaced = status.Error(codes.Aborted, "the virtual machine was replaced while the request was processed; retry")

// rollbackTimeout bounds undoing a grace-period patch after a failed verb;
// it runs even when the request's context is already done.
const rollbackTimeout = 5 * time.Second

func (v *vmService) Start(ctx context.Context, req *apiv1.StartVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	paused := req.GetPaused()
	return v.verb(ctx, req.GetKey(), "start", func(ns, name string) (*apiv1.VirtualMachine, error) {
		return v.s.changeVM(ctx, ns, name, func(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) (*int64, error) {
			return nil, vmlifecycle.Start(vm, vmi, paused)
		})
	}, "paused", paused)
}

func (v *vmService) Stop(ctx context.Context, req *apiv1.StopVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	grace := req.GracePeriodSeconds
	return v.verb(ctx, req.GetKey(), "stop", func(ns, name string) (*apiv1.VirtualMachine, error) {
		return v.s.changeVMWithGrace(ctx, ns, name, grace, vmlifecycle.Stop)
	}, "grace_period_seconds", grace)
}

func (v *vmService) Restart(ctx context.Context, req *apiv1.RestartVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	grace := req.GracePeriodSeconds
	return v.verb(ctx, req.GetKey(), "restart", func(ns, name string) (*apiv1.VirtualMachine, error) {
		return v.s.changeVMWithGrace(ctx, ns, name, grace, vmlifecycle.Restart)
	}, "force", grace != nil)
}

func (v *vmService) Pause(ctx context.Context, req *apiv1.PauseVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	return v.verb(ctx, req.GetKey(), "pause", func(ns, name string) (*apiv1.VirtualMachine, error) {
		return v.s.changeInstance(ctx, ns, name, nil, vmlifecycle.Pause)
	})
}

func (v *vmService) Unpause(ctx context.Context, req *apiv1.UnpauseVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	return v.verb(ctx, req.GetKey(), "unpause", func(ns, name string) (*apiv1.VirtualMachine, error) {
		return v.s.changeInstance(ctx, ns, name, unpauseLocked, vmlifecycle.Unpause)
	})
}

// verb is what every lifecycle verb does around its decision: the
// request's key is checked, change runs on the VM it names, and an
// accepted request is logged with the verb's own attributes.
func (v *vmService) verb(ctx context.Context, key *apiv1.ObjectKey, what string, change func(ns, name string) (*apiv1.VirtualMachine, error), attrs ...any) (*apiv1.VirtualMachine, error) {
	ns, name, err := keyOf(key)
	if err != nil {
		return nil, err
	}
	out, err := change(ns, name)
	if err != nil {
		return nil, err
	}
	v.s.log.Info("virtual machine "+what+" requested", append([]any{"vm", ns + "/" + name}, attrs...)...)
	return out, nil
}

// changeVMWithGrace is changeVM for a verb that takes a grace period (stop,
// restart): the period is checked before anything is read.
func (s *Server) changeVMWithGrace(ctx context.Context, ns, name string, grace *int64, decide func(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance, grace *int64) (*int64, error)) (*apiv1.VirtualMachine, error) {
	if err := checkGrace(name, grace); err != nil {
		return nil, err
	}
	return s.changeVM(ctx, ns, name, func(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) (*int64, error) {
		return decide(vm, vmi, grace)
	})
}

// checkGrace refuses a grace period above what a node can count
// (validation.MaxGracePeriodSeconds); a negative one is vmlifecycle's to
// refuse, in KubeVirt's words.
func checkGrace(name string, grace *int64) error {
	if grace == nil || *grace < 0 {
		return nil
	}
	return validation.ToStatusError("VirtualMachine", name,
		validation.ValidateGracePeriod(*grace, field.NewPath("grace_period_seconds")))
}

// vmDecision is a vmlifecycle verb bound to its request: it mutates vm or
// refuses, and may ask for the instance's grace period to be set first.
type vmDecision func(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) (vmiGrace *int64, err error)

// changeVM runs decide against the VM and its instance and writes the VM.
//
// The decision is made once on a copy before anything is written, so that a
// refusal writes nothing, the instance included. Then a requested grace
// period goes to the instance (before the VM, so the node handler already
// has it when the controller acts on the VM), and finally the VM is written
// with decide run again on every compare-and-swap attempt: it only touches
// the spec's run strategy and the state-change requests and start failure
// of the status, so whatever else the controller wrote in between is kept,
// and a request the controller queued in between is seen (KubeVirt's JSON
// patch gets the same from its test op on the request list).
//
// The instance is the one read at the start throughout; in particular the
// Halted force-stop rule compares against its grace period from before the
// patch.
func (s *Server) changeVM(ctx context.Context, ns, name string, decide vmDecision) (*apiv1.VirtualMachine, error) {
	vm, vmi, err := s.readVM(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	// Every caller changes the run state, which a snapshot or restore
	// holds still; checked again on each write attempt below.
	decide = runStateChecked(decide)
	grace, err := decide(proto.Clone(vm).(*apiv1.VirtualMachine), vmi)
	if err != nil {
		return nil, verbStatus(err)
	}
	var rollback func()
	if grace != nil {
		if rollback, err = s.setInstanceGrace(ctx, vmi, *grace); err != nil {
			return nil, err
		}
	}
	uid := vm.GetMetadata().GetUid()
	out, err := s.stores.VMs.GuaranteedUpdate(ctx, ns, name, func(cur *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		if cur.GetMetadata().GetUid() != uid {
			return nil, errVMReplaced
		}
		spec := proto.Clone(cur.GetSpec())
		if _, err := decide(cur, vmi); err != nil {
			return nil, err
		}
		// A run-strategy flip is a spec change like any other (Update
		// counts those too); KubeVirt's JSON patch of spec.runStrategy
		// bumps the generation the same way.
		if !proto.Equal(spec, cur.GetSpec()) {
			cur.Metadata.Generation++
		}
		return cur, nil
	})
	if err != nil {
		if rollback != nil {
			rollback()
		}
		return nil, verbStatus(err)
	}
	return out, nil
}

// changeInstance runs verb (pause or unpause) against the VM's instance and
// writes the instance; the VM itself is not written and is returned as read.
// locked, when set, may refuse the verb on the VM (a snapshot's lock).
func (s *Server) changeInstance(ctx context.Context, ns, name string, locked func(*apiv1.VirtualMachine) error, verb func(*apiv1.VirtualMachineInstance) error) (*apiv1.VirtualMachine, error) {
	vm, vmi, err := s.readVM(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	if locked != nil {
		if err := locked(vm); err != nil {
			return nil, err
		}
	}
	var probe *apiv1.VirtualMachineInstance
	if vmi != nil {
		probe = proto.Clone(vmi).(*apiv1.VirtualMachineInstance)
	}
	if err := verb(probe); err != nil { // a nil instance refuses: "VM is not running"
		return nil, verbStatus(err)
	}
	uid := vmi.GetMetadata().GetUid()
	err = s.updateInstance(ctx, ns, name, func(cur *apiv1.VirtualMachineInstance) error {
		if cur.GetMetadata().GetUid() != uid {
			return errInstanceChanged
		}
		return verb(cur)
	})
	if err != nil {
		return nil, verbStatus(err)
	}
	return vm, nil
}

// readVM returns the VM and the instance it owns, or nil when there is none.
// An instance of the same name that another VM owns (this VM's predecessor,
// say, still terminating) is not this VM's and is ignored.
func (s *Server) readVM(ctx context.Context, ns, name string) (*apiv1.VirtualMachine, *apiv1.VirtualMachineInstance, error) {
	vm, err := s.stores.VMs.Get(ctx, ns, name)
	if err != nil {
		return nil, nil, toStatus(err)
	}
	vmi, err := s.stores.VMIs.Get(ctx, ns, name)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return vm, nil, nil
	case err != nil:
		return nil, nil, toStatus(err)
	case !apiv1.IsControlledBy(vmi, vm):
		return vm, nil, nil
	}
	return vm, vmi, nil
}

// setInstanceGrace writes grace to the instance's termination grace period
// and returns how to undo that if the VM write then fails. KubeVirt patches
// with a test op on the value it read; here a value changed since the read
// aborts the same way, so a force stop never lengthens a grace period
// someone else just shortened.
func (s *Server) setInstanceGrace(ctx context.Context, vmi *apiv1.VirtualMachineInstance, grace int64) (rollback func(), err error) {
	md := vmi.GetMetadata()
	read := vmi.GetSpec().TerminationGracePeriodSeconds
	err = s.updateInstance(ctx, md.GetNamespace(), md.GetName(), func(cur *apiv1.VirtualMachineInstance) error {
		if cur.GetMetadata().GetUid() != md.GetUid() || !sameGrace(cur.GetSpec().TerminationGracePeriodSeconds, read) {
			return errInstanceChanged
		}
		ensureSpec(cur).TerminationGracePeriodSeconds = &grace
		return nil
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return func() { s.restoreInstanceGrace(ctx, vmi, grace) }, nil
}

// restoreInstanceGrace puts back the grace period vmi had, unless someone
// changed it again since setInstanceGrace wrote set. Restart's rollback is
// KubeVirt's; stop gets it too, because a stop that did not happen should
// not leave a shortened grace period behind.
func (s *Server) restoreInstanceGrace(ctx context.Context, vmi *apiv1.VirtualMachineInstance, set int64) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	md := vmi.GetMetadata()
	old := vmi.GetSpec().TerminationGracePeriodSeconds
	err := s.updateInstance(ctx, md.GetNamespace(), md.GetName(), func(cur *apiv1.VirtualMachineInstance) error {
		if cur.GetMetadata().GetUid() != md.GetUid() || !sameGrace(cur.GetSpec().TerminationGracePeriodSeconds, &set) {
			return nil // not ours any more: leave it
		}
		ensureSpec(cur).TerminationGracePeriodSeconds = old
		return nil
	})
	// errInstanceChanged: the instance is gone, and its grace period with it.
	if err != nil && !errors.Is(err, errInstanceChanged) {
		s.log.Warn("could not restore the instance's grace period after a failed verb",
			"vmi", md.GetNamespace()+"/"+md.GetName(), "error", err)
	}
}

// updateInstance writes the instance ns/name with compare-and-swap: change
// edits the current instance or refuses, and a spec change is counted in
// the generation. An instance that is gone is errInstanceChanged.
func (s *Server) updateInstance(ctx context.Context, ns, name string, change func(cur *apiv1.VirtualMachineInstance) error) error {
	_, err := s.stores.VMIs.GuaranteedUpdate(ctx, ns, name, func(cur *apiv1.VirtualMachineInstance) (*apiv1.VirtualMachineInstance, error) {
		spec := proto.Clone(cur.GetSpec())
		if err := change(cur); err != nil {
			return nil, err
		}
		bumpIfSpecChanged(cur, spec)
		return cur, nil
	})
	if errors.Is(err, store.ErrNotFound) {
		return errInstanceChanged
	}
	return err
}

func ensureSpec(vmi *apiv1.VirtualMachineInstance) *apiv1.VirtualMachineInstanceSpec {
	if vmi.Spec == nil {
		vmi.Spec = &apiv1.VirtualMachineInstanceSpec{}
	}
	return vmi.Spec
}

func sameGrace(a, b *int64) bool {
	return (a == nil && b == nil) || (a != nil && b != nil && *a == *b)
}

// bumpIfSpecChanged counts a spec change in the generation, as every spec
// write does.
func bumpIfSpecChanged(vmi *apiv1.VirtualMachineInstance, before proto.Message) {
	if !proto.Equal(before, vmi.GetSpec()) {
		vmi.Metadata.Generation++
	}
}

// verbStatus maps vmlifecycle's errors: a refusal is KubeVirt's 409, which
// gRPC spells FailedPrecondition ("the system is not in a state required
// for the operation"); a malformed request is InvalidArgument.
func verbStatus(err error) error {
	var refused *vmlifecycle.RefusedError
	var invalid *vmlifecycle.InvalidError
	switch {
	case errors.As(err, &refused):
		return status.Error(codes.FailedPrecondition, refused.Message)
	case errors.As(err, &invalid):
		return status.Error(codes.InvalidArgument, invalid.Error())
	}
	return toStatus(err)
}
