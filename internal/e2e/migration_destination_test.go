package e2e

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	mncluster "github.com/virtplane/terraform-provider-virtplane/internal/testutil/cluster"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/multinode"
)

// A migration's destination is where the source host's libvirtd connects
// (peer-to-peer) and QEMU's stream goes. libvirt's ext transport runs the
// URI's command= as the daemon's user, root: a destination anyone but the
// server names is a root shell on the source host. These tests try it the
// two ways issue 33 names, through the real launcher and libvirtd of the
// multi-node harness, with a command that leaves a marker file.

// extCommand is a program a qemu+ext:// URI names: it writes the user it
// ran as into its marker file, and nothing else.
type extCommand struct {
	marker, uri string
}

func newExtCommand(t *testing.T) extCommand {
	t.Helper()
	// Under /tmp, which every node's libvirtd sees at the same path (only
	// libvirt's own dirs are private to a node).
	dir, err := os.MkdirTemp("/tmp", "vp-ext-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	e := extCommand{marker: filepath.Join(dir, "ran-as")}
	script := filepath.Join(dir, "ext-command")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nid -u > "+e.marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// With a host: libvirtd, opening a URI for a peer-to-peer migration,
	// leaves one without a host to its own drivers (the local QEMU
	// driver, "the same host"); with one, the remote driver takes it and
	// its ext transport runs command.
	e.uri = "qemu+ext://" + foreignAddress(t) + "/system?command=" + script
	return e
}

// ran says whether the command ran, and as whom.
func (e extCommand) ran() (bool, string) {
	b, err := os.ReadFile(e.marker)
	return err == nil, strings.TrimSpace(string(b))
}

// wantNotRun fails the test if the command ran.
func (e extCommand) wantNotRun(t *testing.T, when string) {
	t.Helper()
	if ok, uid := e.ran(); ok {
		t.Fatalf("%s: the source host's libvirtd ran %s as uid %s (marker %s exists)", when, e.uri, uid, e.marker)
	}
}

// foreignAddress is a host that is no node: the hub's address on the
// guests' segment.
func foreignAddress(t *testing.T) string {
	p, err := netip.ParsePrefix(multinode.HubGuestAddr)
	if err != nil {
		t.Fatal(err)
	}
	return p.Addr().String()
}

// migrationToDeadTarget runs VM name, stops the other node's agent (its
// certificate stays: the attacker's now) and starts a migration there; it
// returns once the server handed the migration to the nodes, with the
// instance as then.
func (c *mnCluster) migrationToDeadTarget(name string) (mig string, src, dst *mnNode, vmi *apiv1.VirtualMachineInstance) {
	c.t.Helper()
	// Not pinned: a pin to its node would keep it there.
	vm := guestVM(c.ns, name, apiv1.RunStrategyAlways, c.nodes[0].Kernel, "virtplane.tick")
	if _, err := c.api.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
		c.t.Fatal(err)
	}
	vmi = c.waitRunning(name)
	src = c.nodeNamed(vmi.GetStatus().GetNodeName())
	dst = c.otherNode(src)
	src.console(c.t, vmi.GetMetadata().GetUid()).waitMarker(testguest.MarkerTick+" n=5", bootTimeout)
	testutil.Eventually(c.t, 30*time.Second, "the instance to report LiveMigratable", func() bool {
		return apiv1.IsConditionTrue(c.vmi(name).GetStatus().GetConditions(), apiv1.ConditionLiveMigratable)
	})
	if err := dst.KillAgent(); err != nil {
		c.t.Fatal(err)
	}
	m, err := c.api.VMs.Migrate(c.ctx, &apiv1.MigrateVirtualMachineRequest{
		Key: c.key(name), AddedNodeSelector: map[string]string{apiv1.LabelNodeName: dst.Name}})
	if err != nil {
		c.t.Fatal(err)
	}
	testutil.EventuallyNoError(c.t, migrationTimeout, "the handoff of "+m.GetMetadata().GetName(), func() error {
		vmi = c.vmi(name)
		if st := vmi.GetStatus().GetMigrationState(); st.GetMigrationUid() != m.GetMetadata().GetUid() {
			return fmt.Errorf("instance migration state %v", st)
		}
		return nil
	})
	return m.GetMetadata().GetName(), src, dst, vmi
}

// dialAsNode is a client of the servers that authenticates as node n,
// with the certificate n joined with (its data dir's identity).
func (c *mnCluster) dialAsNode(n *mnNode) *client.Client {
	c.t.Helper()
	id := pki.IdentityDir(n.DataDir)
	kp, err := pki.LoadKeyPair(id.PairFile(), id.PairFile())
	if err != nil {
		c.t.Fatal(err)
	}
	cl, err := client.Dial(c.ctx, client.Config{Endpoint: strings.Join(c.ServerEndpoints(), ","), CAFile: id.CAFile(),
		ClientCertificate: kp.GetClientCertificate})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { cl.Close() })
	return cl
}

// readyAt is what a receiving target publishes, here with the destination
// the attacker wants: the source domain's own migratable XML stands in for
// the receiving domain's (the target never made one).
func (c *mnCluster) readyAt(src *mnNode, name, uri, addr string) func(*apiv1.MigrationState) {
	c.t.Helper()
	xml, err := src.Virsh(c.ctx, "dumpxml", "--migratable", c.domain(name))
	if err != nil {
		c.t.Fatal(err)
	}
	return func(st *apiv1.MigrationState) {
		st.TargetLibvirtUri, st.TargetNodeAddress = uri, addr
		st.TargetReadyTimestamp, st.TargetDomainXml = timestamppb.Now(), xml
	}
}

// TestMigrationTargetCannotNameTheDestination: the node a migration goes
// to, with its own node certificate, publishes itself ready at
// qemu+ext://<host>/system?command=<script> and at a foreign address. The API
// refuses both writes, naming the field; the source never starts.
func TestMigrationTargetCannotNameTheDestination(t *testing.T) {
	// A long lease: the target's agent is gone for the whole test, and
	// the node must not be judged down meanwhile.
	c := newMultiNodeCluster(t, mnOptions{nodeLease: 3 * time.Minute})
	ext := newExtCommand(t)
	mig, src, dst, _ := c.migrationToDeadTarget("victim")
	asTarget := c.dialAsNode(dst)
	foreign := foreignAddress(t)

	write := func(mut func(*apiv1.MigrationState)) error {
		next := proto.Clone(c.vmi("victim")).(*apiv1.VirtualMachineInstance)
		mut(next.Status.MigrationState)
		_, err := asTarget.VMIs.UpdateStatus(c.ctx, &apiv1.UpdateVirtualMachineInstanceStatusRequest{Vmi: next})
		return err
	}
	legit := c.vmi("victim").GetStatus().GetMigrationState()
	for _, tc := range []struct {
		name, field string
		mut         func(*apiv1.MigrationState)
	}{
		{"an ext:// URI and a foreign address", "status.migration_state.target_libvirt_uri", c.readyAt(src, "victim", ext.uri, foreign)},
		{"the server's URI with a foreign address", "status.migration_state.target_node_address",
			c.readyAt(src, "victim", legit.GetTargetLibvirtUri(), foreign)},
	} {
		err := write(tc.mut)
		if err == nil {
			// What the write leads to: the source starts libvirt's job to
			// that destination.
			m := c.waitMigrationEnd(mig)
			ok, uid := ext.ran()
			t.Fatalf("%s: the API accepted the target's write; the migration then ended %s (%s); the source's libvirtd ran %s: %v (uid %q, marker %s)",
				tc.name, m.GetStatus().GetPhase(), m.GetStatus().GetMigrationState().GetFailureReason(), ext.uri, ok, uid, ext.marker)
		}
		if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), tc.field) {
			t.Fatalf("%s: %v; want PermissionDenied naming %s", tc.name, err, tc.field)
		}
		t.Logf("%s: refused: %v", tc.name, err)
	}
	// Nothing started: the migration still waits for its target, the
	// guest runs on the source alone.
	m, err := c.api.Migrations.Get(c.ctx, &apiv1.GetMigrationRequest{Key: c.key(mig)})
	if err != nil || m.GetStatus().GetPhase() != apiv1.MigrationPreparingTarget || m.GetStatus().GetMigrationState().GetStartTimestamp() != nil {
		t.Fatalf("migration after the refused writes: %v, %v; want PreparingTarget, not started", m.GetStatus(), err)
	}
	ext.wantNotRun(t, "after the refused writes")
	c.guestStaysOn("victim", src)
}

// TestMigrationDestinationFromTheStoreIsRefused: the same destination
// written straight into etcd while a migration waits for its target (a
// compromised store, or data from before this check), with the target's
// ready fields: the source refuses to start, the migration fails saying
// why, the command never runs and the guest stays on the source. Then a
// migration to the same node with the destination the server builds
// succeeds.
func TestMigrationDestinationFromTheStoreIsRefused(t *testing.T) {
	c := newMultiNodeCluster(t, mnOptions{nodeLease: 3 * time.Minute})
	ext := newExtCommand(t)
	mig, src, dst, _ := c.migrationToDeadTarget("victim")

	cli, err := c.EtcdClient(c.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	vmis := store.New(cli, store.VirtualMachineInstances, store.Options{Prefix: mncluster.DefaultEtcdPrefix + "/registry"})
	ready := c.readyAt(src, "victim", ext.uri, foreignAddress(t))
	if _, err := vmis.GuaranteedUpdate(c.ctx, c.ns, "victim", func(v *apiv1.VirtualMachineInstance) (*apiv1.VirtualMachineInstance, error) {
		if v.GetStatus().GetMigrationState().GetStartTimestamp() != nil {
			return nil, errors.New("the source started before the write")
		}
		ready(v.Status.MigrationState)
		return v, nil
	}); err != nil {
		t.Fatal(err)
	}
	m := c.waitMigrationEnd(mig)
	ext.wantNotRun(t, "after the migration ended")
	reason := m.GetStatus().GetMigrationState().GetFailureReason()
	if m.GetStatus().GetPhase() != apiv1.MigrationFailed || !strings.Contains(reason, "destination") || !strings.Contains(reason, "qemu+ext") {
		t.Fatalf("migration ended %s (%s), want Failed saying the destination qemu+ext... was refused", m.GetStatus().GetPhase(), reason)
	}
	t.Logf("migration failed: %s", reason)
	c.guestStaysOn("victim", src)

	// The target back: the destination the server builds from its
	// registration works.
	c.restartNodeAgent(dst)
	done := c.migrate("victim", dst)
	st := done.GetStatus().GetMigrationState()
	t.Logf("then migrated to %s at %s (stream to %s)", dst.Name, st.GetTargetLibvirtUri(), st.GetTargetNodeAddress())
	if want := fmt.Sprintf("qemu+tcp://%s:%d/system", dst.Addr, multinode.TCPPort); st.GetTargetLibvirtUri() != want || st.GetTargetNodeAddress() != dst.Addr {
		t.Errorf("destination %s, %s; want %s, %s (the node's registration and the cluster's transport)", st.GetTargetLibvirtUri(), st.GetTargetNodeAddress(), want, dst.Addr)
	}
	ext.wantNotRun(t, "after the second migration")
	c.guestStaysOn("victim", dst)
}

// waitMigrationEnd waits until migration name is final and returns it.
func (c *mnCluster) waitMigrationEnd(name string) *apiv1.VirtualMachineInstanceMigration {
	c.t.Helper()
	var m *apiv1.VirtualMachineInstanceMigration
	testutil.EventuallyNoError(c.t, migrationTimeout, "migration "+name+" to end", func() error {
		var err error
		if m, err = c.api.Migrations.Get(c.ctx, &apiv1.GetMigrationRequest{Key: c.key(name)}); err != nil {
			return err
		}
		if !apiv1.IsMigrationFinal(m.GetStatus().GetPhase()) {
			return fmt.Errorf("phase %s (%s: %s)", m.GetStatus().GetPhase(), m.GetStatus().GetReason(), m.GetStatus().GetMessage())
		}
		return nil
	})
	return m
}
