package pool

import (
	"context"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/controllertest"
	vmctl "github.com/virtplane/terraform-provider-virtplane/internal/controller/vm"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// cluster is the pool controller with the real VM controller over the
// same caches, and a node that runs every instance it is given.
type cluster struct {
	*fixture
	vmc *vmctl.Controller
	// starts counts the instances created per VM.
	starts map[string]int
	// maxDown is the most VMs seen without a Running, Ready instance at
	// once.
	maxDown int
}

func newCluster(t *testing.T, pool *apiv1.VirtualMachinePool) *cluster {
	f := newFixture(t, pool)
	vmc := vmctl.New(vmctl.Options{Clock: func() time.Time { return f.now }, Rand: func() float64 { return 0 }},
		f.vms.Informer, f.vmis.Informer, f.vms.Store, f.vmis.Store, controllertest.Discard())
	return &cluster{fixture: f, vmc: vmc, starts: map[string]int{}}
}

// step runs the node, every VM and the pool once, each after a sync, and
// reports whether anything was written. Errors (conflicts between the
// two controllers) are retried by the next step, as the queue would.
func (c *cluster) step(t *testing.T) bool {
	t.Helper()
	ctx := context.Background()
	c.resetWrites()
	c.sync(t)
	vmis, _, _ := c.vmis.Store.List(ctx, store.ListOptions{})
	for _, vmi := range vmis {
		c.vmis.Update(t, "default", vmi.Metadata.Name, func(vmi *apiv1.VirtualMachineInstance) {
			switch {
			case vmi.Metadata.DeletionTimestamp != nil && !apiv1.IsFinal(vmi.Status.Phase):
				vmi.Status.SetPhase(apiv1.PhaseSucceeded, t0) // the guest shut down
				setReady(&vmi.Status.Conditions, false)
			case vmi.Status.Phase == apiv1.PhasePending:
				vmi.Status.SetPhase(apiv1.PhaseRunning, t0)
				setReady(&vmi.Status.Conditions, true)
			}
		})
	}
	c.sync(t)
	vms, _, _ := c.vms.Store.List(ctx, store.ListOptions{})
	down := 0
	for _, vm := range vms {
		vmi, err := c.vmis.Store.Get(ctx, "default", vm.Metadata.Name)
		if err != nil || vmi.Metadata.DeletionTimestamp != nil || vmi.Status.Phase != apiv1.PhaseRunning {
			down++
		}
	}
	c.maxDown = max(c.maxDown, down)
	for _, vm := range vms {
		_, _ = c.vmc.Reconcile(ctx, informer.Key(vm))
	}
	c.sync(t)
	_, _ = c.c.Reconcile(ctx, poolKey0)
	for _, w := range c.vmis.Store.Writes() {
		if w.Op == "create" {
			c.starts[w.Object.Metadata.Name]++
		}
	}
	return len(c.vms.Store.Writes())+len(c.vmis.Store.Writes())+len(c.pools.Store.Writes()) > 0
}

func (c *cluster) run(t *testing.T) {
	t.Helper()
	for range 50 {
		if !c.step(t) {
			return
		}
	}
	t.Fatal("no steady state after 50 steps")
}

// The rollout's restart, carried out by the real VM controller, restarts
// each VM exactly once, whatever the run strategy that restarts at all.
func TestRolloutRestartsEachVMOnceThroughTheVMController(t *testing.T) {
	for _, strategy := range []string{apiv1.RunStrategyAlways, apiv1.RunStrategyRerunOnFailure, apiv1.RunStrategyManual} {
		t.Run(strategy, func(t *testing.T) {
			p := newPool(3)
			p.Spec.MaxUnavailable = "1"
			p.Spec.VirtualMachineTemplate.Spec.RunStrategy = strategy
			c := newCluster(t, p)
			c.run(t)
			if strategy == apiv1.RunStrategyManual {
				// A Manual VM starts when asked to.
				for _, name := range names("web", 0, 1, 2) {
					c.vms.Update(t, "default", name, func(vm *apiv1.VirtualMachine) {
						vm.Status.StateChangeRequests = []*apiv1.StateChangeRequest{{Action: apiv1.StateChangeStart}}
					})
				}
				c.run(t)
			}
			for _, name := range names("web", 0, 1, 2) {
				if c.starts[name] != 1 {
					t.Fatalf("%s started %d times before the rollout", name, c.starts[name])
				}
			}
			if st := c.pool(t).Status; st.ReadyReplicas != 3 || st.UpdatedReplicas != 3 {
				t.Fatalf("status before the rollout = %v", st)
			}

			changeMemory(t, c.fixture, "256Mi")
			c.maxDown = 0
			c.run(t)
			if c.maxDown != 1 {
				t.Errorf("%d VMs down at once during the rollout, want 1 (max_unavailable)", c.maxDown)
			}
			for _, name := range names("web", 0, 1, 2) {
				if c.starts[name] != 2 {
					t.Errorf("%s started %d times, want 2 (one restart)", name, c.starts[name])
				}
				vmi := c.vmis.Get(t, "default", name)
				if vmi.Spec.Domain.Memory.Guest != "256Mi" || vmi.Status.Phase != apiv1.PhaseRunning {
					t.Errorf("%s's instance: %s, %s", name, vmi.Spec.Domain.Memory.Guest, vmi.Status.Phase)
				}
				if sf := c.vms.Get(t, "default", name).Status.StartFailure; sf != nil {
					t.Errorf("%s: the restart counted as a start failure: %v", name, sf)
				}
			}
			if st := c.pool(t).Status; st.ReadyReplicas != 3 || st.UpdatedReplicas != 3 || st.TemplateGeneration != 2 {
				t.Fatalf("status after the rollout = %v", st)
			}
		})
	}
}

// Deleting a pool deletes its VMs, which the VM controller takes down
// with their instances; the pool goes last.
func TestDeletedPoolGoesAfterItsVMsAndInstances(t *testing.T) {
	c := newCluster(t, newPool(2))
	c.run(t)
	if _, _, err := c.pools.Store.Delete(context.Background(), "default", "web", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.run(t)
	ctx := context.Background()
	if pools, _, _ := c.pools.Store.List(ctx, store.ListOptions{}); len(pools) != 0 {
		t.Errorf("pool still stored: %v", pools)
	}
	if vms, _, _ := c.vms.Store.List(ctx, store.ListOptions{}); len(vms) != 0 {
		t.Errorf("VMs left: %d", len(vms))
	}
	if vmis, _, _ := c.vmis.Store.List(ctx, store.ListOptions{}); len(vmis) != 0 {
		t.Errorf("instances left: %d", len(vmis))
	}
}
