package e2e

import (
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// TestHungNodeAgentOnRealNodes is the controllers' node-loss scenario on
// two real libvirt hosts: the node agent of a node hangs (SIGSTOP). The
// RestartElsewhere VM's launcher fences its guest when the node lease
// runs out, and the VM runs on the other node after the lease and the
// fence margin, never on both at once; the Wait VM keeps its guest (same
// QEMU). After SIGCONT nothing is started twice.
func TestHungNodeAgentOnRealNodes(t *testing.T) {
	const lease, margin, heartbeat = 10 * time.Second, 5 * time.Second, 2 * time.Second
	c := newMultiNodeCluster(t, mnOptions{nodeLease: lease, heartbeat: heartbeat,
		serverArgs: []string{"--fence-margin", margin.String()}})
	t.Cleanup(c.dumpOnFailure)

	mover := guestVM(c.ns, "elsewhere", apiv1.RunStrategyAlways, c.nodes[0].Kernel, "virtplane.tick")
	mover.Spec.NodeFailurePolicy = apiv1.NodeFailurePolicyRestartElsewhere
	if _, err := c.api.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: mover}); err != nil {
		t.Fatal(err)
	}
	first := c.waitRunning("elsewhere")
	hung := c.nodeNamed(first.GetStatus().GetNodeName())
	other := c.otherNode(hung)
	// The Wait VM on the same node.
	if _, err := c.api.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: c.guestVM("waiter", hung, "virtplane.tick")}); err != nil {
		t.Fatal(err)
	}
	c.waitRunning("waiter")
	moverDom, waiterDom := apiv1.DomainName(c.ns, "elsewhere"), apiv1.DomainName(c.ns, "waiter")
	var waiterPid int
	testutil.Eventually(t, stateTimeout, "the Wait VM's QEMU", func() bool {
		waiterPid = hung.QEMUPid(waiterDom)
		return waiterPid > 0
	})

	// Sampled all along: the RestartElsewhere guest never runs on both.
	stop := make(chan struct{})
	var (
		mu      sync.Mutex
		doubled []string
		wg      sync.WaitGroup
	)
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if a, b := hung.QEMUPid(moverDom), other.QEMUPid(moverDom); a > 0 && b > 0 {
				mu.Lock()
				doubled = append(doubled, fmt.Sprintf("%s: QEMU %d on %s and %d on %s", time.Now().Format("15:04:05.000"), a, hung.Name, b, other.Name))
				mu.Unlock()
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()

	if err := hung.Agent.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	t.Cleanup(func() { _ = hung.Agent.Cmd.Process.Signal(syscall.SIGCONT) })

	var moved *apiv1.VirtualMachineInstance
	testutil.Eventually(t, lease+margin+2*bootTimeout, "the RestartElsewhere VM to run on "+other.Name, func() bool {
		moved = c.vmi("elsewhere")
		return moved.GetMetadata().GetUid() != first.GetMetadata().GetUid() &&
			moved.GetStatus().GetNodeName() == other.Name && moved.GetStatus().GetPhase() == apiv1.PhaseRunning
	})
	after := time.Since(frozen)
	t.Logf("RestartElsewhere VM running on %s %s after the agent froze (lease %s + margin %s)", other.Name, after.Round(100*time.Millisecond), lease, margin)
	// The lease and margin run from the last heartbeat, one interval (and
	// its jitter under load) before the freeze at most; the margin covers
	// that, so the guest never moves before a whole lease after the freeze.
	if after < lease {
		t.Errorf("moved after %s, before a node lease (%s) had passed", after, lease)
	}
	if pid := hung.QEMUPid(waiterDom); pid != waiterPid {
		t.Fatalf("the Wait VM's QEMU is %d, was %d: it did not keep its guest", pid, waiterPid)
	}

	if err := hung.Agent.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Back: the node is Ready again and nothing runs twice.
	testutil.EventuallyNoError(t, stateTimeout, hung.Name+" ready again", func() error {
		n, err := c.api.Nodes.Get(c.ctx, &apiv1.GetNodeRequest{Name: hung.Name})
		if err != nil {
			return err
		}
		if !apiv1.IsConditionTrue(n.GetStatus().GetConditions(), apiv1.ConditionReady) {
			return fmt.Errorf("conditions %v", n.GetStatus().GetConditions())
		}
		return nil
	})
	testutil.Consistently(t, 10*time.Second, "each guest once, where it is", func() bool {
		st, err := hung.DomainState(c.ctx, moverDom)
		gone := err != nil || !strings.HasPrefix(st, "running")
		return gone && other.QEMUPid(moverDom) > 0 && hung.QEMUPid(waiterDom) == waiterPid &&
			c.vmi("waiter").GetStatus().GetPhase() == apiv1.PhaseRunning
	})
	mu.Lock()
	defer mu.Unlock()
	if len(doubled) > 0 {
		t.Fatalf("the RestartElsewhere guest ran on both nodes: %s", strings.Join(doubled, "; "))
	}
}
