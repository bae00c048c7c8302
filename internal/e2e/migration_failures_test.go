package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// Migrations that do not go as planned: canceled, or with a node agent
// killed while libvirt's job runs. The stream is throttled (server flag
// --migration-bandwidth) and, where the job must not end on its own, the
// guest rewrites memory faster than that (virtplane.dirty).

// startMigrating creates the throttled guest, starts its migration to the
// other node and waits until libvirt's job runs; it returns the
// migration's name and the source and target nodes.
func startMigrating(c *mnCluster, name, cmdline string) (mig string, src, dst *mnNode) {
	c.t.Helper()
	vm := guestVM(c.ns, name, apiv1.RunStrategyAlways, c.nodes[0].Kernel, cmdline)
	if _, err := c.api.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
		c.t.Fatal(err)
	}
	vmi := c.waitRunning(name)
	src = c.nodeNamed(vmi.GetStatus().GetNodeName())
	dst = c.otherNode(src)
	c.t.Cleanup(func() { c.dumpOnFailure() })
	src.console(c.t, vmi.GetMetadata().GetUid()).waitMarker(testguest.MarkerTick+" n=5", bootTimeout)
	m, err := c.api.VMs.Migrate(c.ctx, &apiv1.MigrateVirtualMachineRequest{
		Key: &apiv1.ObjectKey{Namespace: c.ns, Name: name}, AddedNodeSelector: map[string]string{apiv1.LabelNodeName: dst.Name}})
	if err != nil {
		c.t.Fatal(err)
	}
	mig = m.GetMetadata().GetName()
	testutil.EventuallyNoError(c.t, migrationTimeout, "libvirt's job to run with progress", func() error {
		m, err := c.api.Migrations.Get(c.ctx, &apiv1.GetMigrationRequest{Key: &apiv1.ObjectKey{Namespace: c.ns, Name: mig}})
		if err != nil {
			return err
		}
		if p := m.GetStatus().GetMigrationState().GetProgress(); m.GetStatus().GetPhase() != apiv1.MigrationRunning || p.GetDataProcessedBytes() == 0 {
			return fmt.Errorf("phase %s, progress %v", m.GetStatus().GetPhase(), p)
		}
		return nil
	})
	return mig, src, dst
}

func (c *mnCluster) dumpOnFailure() {
	if c.t.Failed() {
		c.dumpLogs()
	}
}

// guestStaysOn checks that VM name's instance runs on n, alone, with its
// counter still going.
func (c *mnCluster) guestStaysOn(name string, n *mnNode) {
	c.t.Helper()
	vmi := c.vmi(name)
	if vmi.GetStatus().GetNodeName() != n.Name || vmi.GetStatus().GetPhase() != apiv1.PhaseRunning {
		c.t.Fatalf("instance on %q, %s; want Running on %s", vmi.GetStatus().GetNodeName(), vmi.GetStatus().GetPhase(), n.Name)
	}
	testutil.EventuallyNoError(c.t, time.Minute, "the guest on "+n.Name+" only", func() error { return c.runsOnlyOn(name, n) })
	con := []*console{n.console(c.t, vmi.GetMetadata().GetUid())}
	var first int
	testutil.Eventually(c.t, 30*time.Second, "the counter on "+n.Name, func() bool {
		first = maxTick(con)
		return first > 0
	})
	testutil.Eventually(c.t, 30*time.Second, "the counter to go on on "+n.Name, func() bool { return maxTick(con) >= first+10 })
}

func TestMigrationCancel(t *testing.T) {
	c := newMultiNodeCluster(t, mnOptions{serverArgs: []string{"--migration-bandwidth", "1"}})
	mig, src, _ := startMigrating(c, "cancel", "virtplane.tick virtplane.dirty=24")
	if _, err := c.api.Migrations.Delete(c.ctx, &apiv1.DeleteMigrationRequest{Key: &apiv1.ObjectKey{Namespace: c.ns, Name: mig}}); err != nil {
		t.Fatal(err)
	}
	// Once it ended its finalizer goes, and the object with it (maybe
	// before a poll sees it final): the instance keeps the outcome.
	testutil.EventuallyNoError(t, migrationTimeout, "the canceled migration to end and go", func() error {
		_, err := c.api.Migrations.Get(c.ctx, &apiv1.GetMigrationRequest{Key: &apiv1.ObjectKey{Namespace: c.ns, Name: mig}})
		if status.Code(err) == codes.NotFound {
			return nil
		}
		return fmt.Errorf("still there: %v", err)
	})
	st := c.vmi("cancel").GetStatus().GetMigrationState()
	if !st.GetCompleted() || !st.GetFailed() || st.GetAbortStatus() != apiv1.MigrationAbortSucceeded ||
		!strings.Contains(st.GetFailureReason(), "aborted") {
		t.Fatalf("canceled migration's state on the instance: %v", st)
	}
	c.guestStaysOn("cancel", src)
}

func TestMigrationTargetAgentKilled(t *testing.T) {
	c := newMultiNodeCluster(t, mnOptions{serverArgs: []string{"--migration-bandwidth", "1"}})
	mig, src, dst := startMigrating(c, "tkill", "virtplane.tick virtplane.dirty=24")
	if err := dst.KillAgent(); err != nil {
		t.Fatal(err)
	}
	// The receiving domain outlives its agent by the incoming lease
	// (10 s); then the job fails and the guest stays.
	m := c.waitMigration(mig, apiv1.MigrationFailed)
	t.Logf("failed: %s", m.GetStatus().GetMigrationState().GetFailureReason())
	c.guestStaysOn("tkill", src)
	c.restartNodeAgent(dst)
	testutil.EventuallyNoError(t, time.Minute, "nothing left on the target", func() error {
		if ok, err := dst.HasDomain(c.ctx, apiv1.DomainName(c.ns, "tkill")); err != nil || ok {
			return fmt.Errorf("domain on %s: %v, %v", dst.Name, ok, err)
		}
		return nil
	})
}

func TestMigrationSourceAgentKilled(t *testing.T) {
	c := newMultiNodeCluster(t, mnOptions{serverArgs: []string{"--migration-bandwidth", "8"}})
	mig, src, dst := startMigrating(c, "skill", "virtplane.tick")
	if err := src.KillAgent(); err != nil {
		t.Fatal(err)
	}
	// The source's launcher runs the job to its end without its agent.
	testutil.EventuallyNoError(t, migrationTimeout, "the guest to run on the target", func() error {
		st, err := dst.DomainState(c.ctx, apiv1.DomainName(c.ns, "skill"))
		if err != nil || !strings.HasPrefix(st, "running") {
			return fmt.Errorf("domain on %s: %q, %v", dst.Name, st, err)
		}
		return nil
	})
	c.restartNodeAgent(src)
	m := c.waitMigration(mig, apiv1.MigrationSucceeded)
	t.Logf("decided after the restart: %v", m.GetStatus().GetMigrationState().GetProgress())
	c.guestStaysOn("skill", dst)
}
