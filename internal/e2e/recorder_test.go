package e2e

import (
	"context"
	"sync"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// --- watching ----------------------------------------------------------------

// recorder watches the cluster namespace's VMs and VMIs through the API
// and keeps, in order, every printable status of each VM and every phase
// of each VMI (by uid), so tests can assert on what was ever seen, not
// only on what is there when they look.
type recorder struct {
	mu        sync.Mutex
	vmStatus  map[string][]string // VM name → printable statuses, repeats folded
	vmiPhases map[string][]string // VMI uid → phases, repeats folded
	vmiLast   map[string]*apiv1.VirtualMachineInstance
	onNewVMI  func(uid string)
}

func startRecorder(c *cluster) *recorder {
	r := &recorder{vmStatus: map[string][]string{}, vmiPhases: map[string][]string{}, vmiLast: map[string]*apiv1.VirtualMachineInstance{},
		onNewVMI: func(uid string) { c.console(uid) }}
	ctx, cancel := context.WithCancel(c.ctx)
	var wg sync.WaitGroup
	c.t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Add(2)
	opts := &apiv1.WatchOptions{Namespace: c.ns}
	go func() {
		defer wg.Done()
		client.Follow(ctx, func(ctx context.Context) (apiv1.VirtualMachines_WatchClient, error) {
			return c.api.VMs.Watch(ctx, &apiv1.WatchVirtualMachinesRequest{Options: opts})
		}, func(ev *apiv1.VirtualMachineEvent) {
			if ev.GetObject() != nil {
				r.sawVM(ev.GetObject())
			}
		})
	}()
	go func() {
		defer wg.Done()
		client.Follow(ctx, func(ctx context.Context) (apiv1.VirtualMachineInstances_WatchClient, error) {
			return c.api.VMIs.Watch(ctx, &apiv1.WatchVirtualMachineInstancesRequest{Options: opts})
		}, func(ev *apiv1.VirtualMachineInstanceEvent) {
			if ev.GetObject() != nil {
				r.sawVMI(ev.GetObject())
			}
		})
	}()
	return r
}

func appendFolded(s []string, v string) []string {
	if len(s) > 0 && s[len(s)-1] == v {
		return s
	}
	return append(s, v)
}

func (r *recorder) sawVM(vm *apiv1.VirtualMachine) {
	r.mu.Lock()
	defer r.mu.Unlock()
	name := vm.GetMetadata().GetName()
	r.vmStatus[name] = appendFolded(r.vmStatus[name], vm.GetStatus().GetPrintableStatus())
}

func (r *recorder) sawVMI(v *apiv1.VirtualMachineInstance) {
	r.mu.Lock()
	uid := v.GetMetadata().GetUid()
	_, known := r.vmiLast[uid]
	r.vmiPhases[uid] = appendFolded(r.vmiPhases[uid], v.GetStatus().GetPhase())
	r.vmiLast[uid] = v
	r.mu.Unlock()
	if !known && r.onNewVMI != nil {
		r.onNewVMI(uid)
	}
}

// statuses returns the printable statuses VM name went through.
func (r *recorder) statuses(name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.vmStatus[name]...)
}

// phases returns the phases VMI uid went through.
func (r *recorder) phases(uid string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.vmiPhases[uid]...)
}

// last returns the last version of VMI uid the watch delivered, which
// outlives the object.
func (r *recorder) last(uid string) *apiv1.VirtualMachineInstance {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.vmiLast[uid]
}

// waitFinal waits until VMI uid reached a final phase (seen through the
// watch, so also when the VMI was deleted right after) and returns its
// last version.
func (c *cluster) waitFinal(uid string, d time.Duration) *apiv1.VirtualMachineInstance {
	c.t.Helper()
	var v *apiv1.VirtualMachineInstance
	testutil.Eventually(c.t, d, "VMI "+uid+" final", func() bool {
		v = c.rec.last(uid)
		return apiv1.IsFinal(v.GetStatus().GetPhase())
	})
	return v
}
