package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// Tracker watches the VMs and VMIs of a namespace through the API, as a
// client would, and records when each first reached Running: the VMI's
// phase Running (the node agent's write), and the VM's printable status
// Running with ready true (the VM controller's write that ends a start).
// Times are taken when the watch event arrives.
type Tracker struct {
	mu        sync.Mutex
	vmiRun    map[string]time.Time
	vmRun     map[string]time.Time
	vmis      map[string]*apiv1.VirtualMachineInstance // last seen, by name
	changed   chan struct{}
	synced    sync.WaitGroup
	cancel    context.CancelFunc
	done      sync.WaitGroup
	namespace string
}

// NewTracker starts watching namespace and returns once both watches have
// listed what exists.
func NewTracker(ctx context.Context, c *client.Client, namespace string) (*Tracker, error) {
	ctx, cancel := context.WithCancel(ctx)
	t := &Tracker{vmiRun: map[string]time.Time{}, vmRun: map[string]time.Time{},
		vmis: map[string]*apiv1.VirtualMachineInstance{}, changed: make(chan struct{}, 1),
		cancel: cancel, namespace: namespace}
	t.synced.Add(2)
	t.done.Add(2)
	go t.watchVMIs(ctx, c)
	go t.watchVMs(ctx, c)
	waited := make(chan struct{})
	go func() { t.synced.Wait(); close(waited) }()
	select {
	case <-waited:
		return t, nil
	case <-time.After(30 * time.Second):
		t.Close()
		return nil, fmt.Errorf("watching namespace %s: no listing within 30 s", namespace)
	}
}

// Close stops the watches.
func (t *Tracker) Close() {
	t.cancel()
	t.done.Wait()
}

func (t *Tracker) watchVMIs(ctx context.Context, c *client.Client) {
	defer t.done.Done()
	var once sync.Once
	client.Follow(ctx, func(ctx context.Context) (apiv1.VirtualMachineInstances_WatchClient, error) {
		return c.VMIs.Watch(ctx, &apiv1.WatchVirtualMachineInstancesRequest{Options: &apiv1.WatchOptions{Namespace: t.namespace}})
	}, func(ev *apiv1.VirtualMachineInstanceEvent) {
		if ev.GetType() == apiv1.EventType_SYNCED {
			once.Do(t.synced.Done)
		}
		if v := ev.GetObject(); v != nil && ev.GetType() != apiv1.EventType_DELETED {
			t.sawVMI(v)
		}
	})
	once.Do(t.synced.Done)
}

func (t *Tracker) watchVMs(ctx context.Context, c *client.Client) {
	defer t.done.Done()
	var once sync.Once
	client.Follow(ctx, func(ctx context.Context) (apiv1.VirtualMachines_WatchClient, error) {
		return c.VMs.Watch(ctx, &apiv1.WatchVirtualMachinesRequest{Options: &apiv1.WatchOptions{Namespace: t.namespace}})
	}, func(ev *apiv1.VirtualMachineEvent) {
		if ev.GetType() == apiv1.EventType_SYNCED {
			once.Do(t.synced.Done)
		}
		if vm := ev.GetObject(); vm != nil && ev.GetType() != apiv1.EventType_DELETED {
			st := vm.GetStatus()
			if st.GetPrintableStatus() == apiv1.PrintableRunning && st.GetReady() {
				t.mark(t.vmRun, vm.GetMetadata().GetName())
			}
		}
	})
	once.Do(t.synced.Done)
}

func (t *Tracker) sawVMI(v *apiv1.VirtualMachineInstance) {
	name := v.GetMetadata().GetName()
	t.mu.Lock()
	t.vmis[name] = v
	t.mu.Unlock()
	if v.GetStatus().GetPhase() == apiv1.PhaseRunning {
		t.mark(t.vmiRun, name)
	}
}

func (t *Tracker) mark(m map[string]time.Time, name string) {
	now := time.Now()
	t.mu.Lock()
	if _, ok := m[name]; !ok {
		m[name] = now
	}
	t.mu.Unlock()
	select {
	case t.changed <- struct{}{}:
	default:
	}
}

// VMIRunning is when VMI name was first seen Running.
func (t *Tracker) VMIRunning(name string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.vmiRun[name]
	return at, ok
}

// VMRunning is when VM name was first seen Running and ready.
func (t *Tracker) VMRunning(name string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.vmRun[name]
	return at, ok
}

// VMI returns the last version of VMI name the watch delivered.
func (t *Tracker) VMI(name string) *apiv1.VirtualMachineInstance {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.vmis[name]
}

// Counts returns how many VMIs and VMs reached Running.
func (t *Tracker) Counts() (vmis, vms int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.vmiRun), len(t.vmRun)
}

// Forget drops what was recorded about name (before it is created again).
func (t *Tracker) Forget(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.vmiRun, name)
	delete(t.vmRun, name)
	delete(t.vmis, name)
}

// WaitVMsRunning waits until n VMs are Running and ready (and their VMIs
// Running), or timeout. check, when set, is called every 2 s with the
// counts so far; an error from it ends the wait.
func (t *Tracker) WaitVMsRunning(ctx context.Context, n int, timeout time.Duration, check func(vmis, vms int) error) error {
	deadline := time.After(timeout)
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for {
		vmis, vms := t.Counts()
		if vmis >= n && vms >= n {
			return nil
		}
		select {
		case <-t.changed:
		case <-tick.C:
			if check != nil {
				if err := check(vmis, vms); err != nil {
					return err
				}
			}
		case <-deadline:
			return fmt.Errorf("%d of %d VMIs and %d of %d VMs Running after %s", vmis, n, vms, n, timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// PhaseTime returns when VMI v entered phase, from its status' phase
// transition timestamps (the writer's clock); zero when it did not.
func PhaseTime(v *apiv1.VirtualMachineInstance, phase string) time.Time {
	for _, p := range v.GetStatus().GetPhaseTransitionTimestamps() {
		if p.GetPhase() == phase && p.GetTime() != nil {
			return p.GetTime().AsTime()
		}
	}
	return time.Time{}
}
