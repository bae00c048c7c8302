package provider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// Waiting for the state a run strategy implies. Create and update wait;
// read never does. The judgement (judgeVM) is a pure function of the VM and
// its instance so it can be tested without an agent; waitVM feeds it from
// watches, with a poll as a safety net.

// waitTarget is what a wait is for.
type waitTarget struct {
	// strategy is the run strategy whose state is awaited.
	strategy string
	// notUID, when set, is the instance that existed before a restart: the
	// state must be reached by a different one.
	notUID string
	// generation is the VM generation the controller must have acted on
	// first, so that a status from before the change is not taken for
	// its result.
	generation int64
}

// describe renders what the VM is doing: its printable status, the
// instance's phase and the conditions that explain a wait.
func describe(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) string {
	ps := vm.GetStatus().GetPrintableStatus()
	if ps == "" {
		ps = "not yet processed by the VM controller"
	}
	s := "status " + ps
	if vmi != nil {
		s += fmt.Sprintf(", instance %s in phase %s", shortUID(vmi.GetMetadata().GetUid()), cmp.Or(vmi.GetStatus().GetPhase(), "Pending"))
		if n := vmi.GetStatus().GetNodeName(); n != "" {
			s += " on node " + n
		}
	} else {
		s += ", no instance"
	}
	for _, c := range vm.GetStatus().GetConditions() {
		if c.GetType() == apiv1.ConditionReady || c.GetMessage() == "" {
			continue
		}
		s += fmt.Sprintf("; %s=%s (%s): %s", c.GetType(), c.GetStatus(), c.GetReason(), c.GetMessage())
	}
	return s
}

func shortUID(uid string) string {
	if len(uid) > 8 {
		return uid[:8]
	}
	return uid
}

// judgeVM decides whether vm (and its instance vmi, nil when none) has
// reached t, or can no longer reach it without help. The target states
// follow KubeVirt's run strategies: Always and RerunOnFailure run and are
// ready; Halted has no instance; Once has run (Running or Succeeded);
// Manual is whatever the user last asked for, so there is nothing to wait
// for.
func judgeVM(t waitTarget, vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) verdict {
	st := vm.GetStatus()
	v := verdict{state: describe(vm, vmi)}
	if t.strategy == apiv1.RunStrategyManual {
		v.done = true
		return v
	}
	// A status written before the controller saw the change says nothing
	// about the change.
	if st.GetDesiredGeneration() < t.generation || st.GetPrintableStatus() == "" {
		return v
	}
	if f := apiv1.FindCondition(st.GetConditions(), apiv1.ConditionFailure); f.GetStatus() == apiv1.ConditionTrue {
		v.err = fmt.Errorf("the VM controller reports a failure (%s): %s", f.GetReason(), f.GetMessage())
		return v
	}
	newInstance := vmi != nil && vmi.GetMetadata().GetUid() != t.notUID
	phase := vmi.GetStatus().GetPhase()
	switch st.GetPrintableStatus() {
	case apiv1.PrintableErrorUnschedulable:
		v.err = fmt.Errorf("no node can run it (ErrorUnschedulable): %s. Check node_selector, memory, cpu, "+
			"the images and the bridges and libvirt networks the VM names against the nodes (data source "+
			"virtplane_nodes)", unschedulableMessage(vm, vmi))
		return v
	case apiv1.PrintableDataVolumeError:
		v.err = fmt.Errorf("a persistent volume could not be provisioned (DataVolumeError): %s. The node keeps "+
			"retrying: once the cause is fixed (e.g. the image imported on the node) the VM starts on its own", dataVolumeMessage(vmi))
		return v
	case apiv1.PrintableCrashLoopBackOff:
		if t.strategy != apiv1.RunStrategyHalted {
			v.err = crashLoopError(vm, vmi)
			return v
		}
	}
	switch t.strategy {
	case apiv1.RunStrategyAlways, apiv1.RunStrategyRerunOnFailure:
		switch {
		case newInstance && phase == apiv1.PhaseRunning && st.GetReady() &&
			st.GetPrintableStatus() == apiv1.PrintableRunning && instanceReady(vmi):
			v.done = true
		case newInstance && phase == apiv1.PhaseRunning && st.GetPrintableStatus() == apiv1.PrintablePaused:
			// Paused by its user: it runs, and waiting would not unpause it.
			v.done = true
		}
		if newInstance && phase == apiv1.PhaseSucceeded && t.strategy == apiv1.RunStrategyRerunOnFailure {
			v.err = errors.New("the guest powered itself off (instance Succeeded), and RerunOnFailure does not " +
				"restart a guest that shut down cleanly")
		}
	case apiv1.RunStrategyHalted:
		v.done = vmi == nil && st.GetPrintableStatus() == apiv1.PrintableStopped
	case apiv1.RunStrategyOnce:
		switch {
		case newInstance && (phase == apiv1.PhaseRunning || phase == apiv1.PhaseSucceeded):
			v.done = true
		case newInstance && phase == apiv1.PhaseFailed:
			v.err = fmt.Errorf("its instance failed (%s), and Once does not start it again", instanceReason(vmi))
		}
	default:
		// Unknown strategies (a newer agent) are accepted as Manual is.
		v.done = true
	}
	return v
}

// instanceReady reports the instance's own Ready condition.
func instanceReady(vmi *apiv1.VirtualMachineInstance) bool {
	return apiv1.IsConditionTrue(vmi.GetStatus().GetConditions(), apiv1.ConditionReady)
}

func instanceReason(vmi *apiv1.VirtualMachineInstance) string {
	st := vmi.GetStatus()
	s := cmp.Or(st.GetReason(), "no reason given")
	if st.GetMessage() != "" {
		s += ": " + st.GetMessage()
	}
	return s
}

// unschedulableMessage is the placement controller's explanation
// ("0/2 nodes are available: 2 node(s) didn't match node selector.").
func unschedulableMessage(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) string {
	for _, conds := range [][]*apiv1.Condition{vmi.GetStatus().GetConditions(), vm.GetStatus().GetConditions()} {
		if c := apiv1.FindCondition(conds, apiv1.ConditionPodScheduled); c.GetStatus() == apiv1.ConditionFalse && c.GetMessage() != "" {
			return strings.TrimSuffix(c.GetMessage(), ".")
		}
	}
	return "the placement controller found no fitting node"
}

func dataVolumeMessage(vmi *apiv1.VirtualMachineInstance) string {
	if c := apiv1.FindCondition(vmi.GetStatus().GetConditions(), apiv1.ConditionSynchronized); c.GetMessage() != "" {
		return strings.TrimSuffix(c.GetMessage(), ".")
	}
	return "the node agent gave no cause"
}

func crashLoopError(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) error {
	sf := vm.GetStatus().GetStartFailure()
	msg := fmt.Sprintf("it is in CrashLoopBackOff: its instance failed %d time(s) in a row before reaching Running",
		sf.GetConsecutiveFailCount())
	switch {
	case vmi != nil && apiv1.IsFinal(vmi.GetStatus().GetPhase()):
		msg += " (last: " + instanceReason(vmi) + ")"
	case sf.GetLastFailureMessage() != "":
		// The failed instance is gone; the VM kept why it failed.
		msg += " (last: " + sf.GetLastFailureReason() + ": " + sf.GetLastFailureMessage() + ")"
	}
	if ra := sf.GetRetryAfterTimestamp(); ra != nil {
		msg += "; the agent tries again after " + ra.AsTime().UTC().Format(time.RFC3339)
	}
	msg += ". Check the images, kernel and boot settings, and the node agent's log"
	return errors.New(msg)
}

// getVM reads the VM and its instance (nil when it has none).
func getVM(ctx context.Context, c *client.Client, ns, name string) (*apiv1.VirtualMachine, *apiv1.VirtualMachineInstance, error) {
	key := &apiv1.ObjectKey{Namespace: ns, Name: name}
	vm, err := c.VMs.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: key})
	if err != nil {
		return nil, nil, err
	}
	vmi, err := c.VMIs.Get(ctx, &apiv1.GetVirtualMachineInstanceRequest{Key: key})
	switch {
	case status.Code(err) == codes.NotFound:
		return vm, nil, nil
	case err != nil:
		return nil, nil, err
	}
	// An instance of an earlier VM of the same name is not this VM's.
	if !apiv1.IsControlledBy(vmi, vm) {
		return vm, nil, nil
	}
	return vm, vmi, nil
}

// changes signals (without blocking, coalescing) whenever the VM or its
// instance changes, until ctx ends.
func changes(ctx context.Context, c *client.Client, ns, name string) <-chan struct{} {
	ch, notify := notifier()
	opts := &apiv1.WatchOptions{Namespace: ns, Name: name}
	notifyOnEvents(ctx, notify, func(ctx context.Context) (apiv1.VirtualMachines_WatchClient, error) {
		return c.VMs.Watch(ctx, &apiv1.WatchVirtualMachinesRequest{Options: opts})
	})
	notifyOnEvents(ctx, notify, func(ctx context.Context) (apiv1.VirtualMachineInstances_WatchClient, error) {
		return c.VMIs.Watch(ctx, &apiv1.WatchVirtualMachineInstancesRequest{Options: opts})
	})
	return ch
}

// vmView is a VM and its instance (nil when none), as a wait reads them.
type vmView struct {
	vm  *apiv1.VirtualMachine
	vmi *apiv1.VirtualMachineInstance
}

// waitVM waits until judge says done or fails, or ctx ends (waitUntil).
// It returns the last VM and instance seen. A VM that disappears ends the
// wait with codes.NotFound.
func waitVM(ctx context.Context, c *client.Client, ns, name string, judge func(*apiv1.VirtualMachine, *apiv1.VirtualMachineInstance) verdict) (*apiv1.VirtualMachine, *apiv1.VirtualMachineInstance, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	v, err := waitUntil(ctx, "virtual machine "+apiv1.Ref(ns, name), changes(wctx, c, ns, name),
		func(ctx context.Context) (vmView, error) {
			vm, vmi, err := getVM(ctx, c, ns, name)
			return vmView{vm, vmi}, err
		},
		func(v vmView) verdict { return judge(v.vm, v.vmi) })
	return v.vm, v.vmi, err
}

// waitGone waits until the VM no longer exists.
func waitGone(ctx context.Context, c *client.Client, ns, name string) error {
	_, _, err := waitVM(ctx, c, ns, name, func(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) verdict {
		return verdict{state: describe(vm, vmi)}
	})
	if status.Code(err) == codes.NotFound {
		return nil
	}
	return err
}

// targetDescription says in words what a wait for t waits for.
func targetDescription(t waitTarget) string {
	again := ""
	if t.notUID != "" {
		again = " again with a new instance"
	}
	switch t.strategy {
	case apiv1.RunStrategyAlways, apiv1.RunStrategyRerunOnFailure:
		return "to be Running and ready" + again + " (run_strategy " + t.strategy + ")"
	case apiv1.RunStrategyHalted:
		return "to be Stopped with no instance (run_strategy Halted)"
	case apiv1.RunStrategyOnce:
		return "to run once: Running or Succeeded" + again + " (run_strategy Once)"
	}
	return "to settle (run_strategy " + t.strategy + ")"
}

func cloneOps(c *client.Client) namedOps[*apiv1.VirtualMachineClone, apiv1.CloneEvent] {
	return namedOps[*apiv1.VirtualMachineClone, apiv1.CloneEvent]{
		create: func(ctx context.Context, o *apiv1.VirtualMachineClone) (*apiv1.VirtualMachineClone, error) {
			return c.Clones.Create(ctx, &apiv1.CreateCloneRequest{Clone: o})
		},
		get: func(ctx context.Context, key *apiv1.ObjectKey) (*apiv1.VirtualMachineClone, error) {
			return c.Clones.Get(ctx, &apiv1.GetCloneRequest{Key: key})
		},
		watch: func(ctx context.Context, o *apiv1.WatchOptions) (grpc.ServerStreamingClient[apiv1.CloneEvent], error) {
			return c.Clones.Watch(ctx, &apiv1.WatchClonesRequest{Options: o})
		},
		del: func(ctx context.Context, key *apiv1.ObjectKey, o *apiv1.DeleteOptions) error {
			_, err := c.Clones.Delete(ctx, &apiv1.DeleteCloneRequest{Key: key, Options: o})
			return err
		},
		judge:    judgeClone,
		describe: describeClone,
	}
}

// judgeClone: done once the clone is Succeeded; Failed (or being
// deleted) ends the wait with its error.
func judgeClone(c *apiv1.VirtualMachineClone) verdict {
	st := c.GetStatus()
	return judgeFinal(c, describeClone(c), "clone", st.GetPhase() == apiv1.CloneFailed, st.GetError(),
		st.GetPhase() == apiv1.CloneSucceeded)
}

func describeClone(c *apiv1.VirtualMachineClone) string {
	st := c.GetStatus()
	out := "phase " + cmp.Or(st.GetPhase(), "(new)")
	if st.GetRestoreName() != "" {
		out += ", restore " + st.GetRestoreName()
	}
	return out + conditionsText(st.GetConditions()) + errorText(st.GetError())
}
