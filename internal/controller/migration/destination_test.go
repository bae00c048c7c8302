package migration

import (
	"net/netip"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/migrationdest"
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// TestHandoffWritesTheDestination: the handoff names where the target
// receives, built from the target node's registered migration address and
// the cluster's transport and port; the target's agent only reports
// ready.
func TestHandoffWritesTheDestination(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  migrationdest.Policy
		wantURI string
	}{
		{"tls by default", migrationdest.Policy{}, "qemu+tls://10.0.0.2:16514/system"},
		{"tcp when the operator chose it", migrationdest.Policy{Transport: migrationdest.TransportTCP}, "qemu+tcp://10.0.0.2:16509/system"},
		{"another port", migrationdest.Policy{Transport: migrationdest.TransportTLS, Port: 1514}, "qemu+tls://10.0.0.2:1514/system"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{Destinations: tc.policy}, []*apiv1.VirtualMachineInstance{runningVMI("vm1", "a")},
				newMigration("m1", "vm1", t0))
			f.toPreparing("m1")
			st := f.vmi("vm1").GetStatus().GetMigrationState()
			if st.GetTargetLibvirtUri() != tc.wantURI || st.GetTargetNodeAddress() != "10.0.0.2" {
				t.Fatalf("handoff destination %q, %q; want %q, 10.0.0.2", st.GetTargetLibvirtUri(), st.GetTargetNodeAddress(), tc.wantURI)
			}
			if err := migrationdest.Validate(st.GetTargetLibvirtUri(), st.GetTargetNodeAddress()); err != nil {
				t.Fatalf("the source would refuse what the server built: %v", err)
			}
			// The target reports ready without a destination of its own;
			// the migration mirrors the server's.
			f.report("vm1", func(v *apiv1.VirtualMachineInstance) {
				v.Status.MigrationState.TargetReadyTimestamp = timestamppb.New(f.now)
				v.Status.MigrationState.TargetDomainXml = "<domain/>"
			})
			f.step("m1")
			if m := f.wantPhase("m1", apiv1.MigrationTargetReady); m.GetStatus().GetMigrationState().GetTargetLibvirtUri() != tc.wantURI {
				t.Fatalf("migration mirrors %v", m.GetStatus().GetMigrationState())
			}
		})
	}
}

// TestHandoffRefusesTargetsWithoutADestination: no handoff to a node with
// no migration address, one outside the operator's networks, or one
// another node registered too; the migration fails saying which.
func TestHandoffRefusesTargetsWithoutADestination(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy migrationdest.Policy
		node   func(*apiv1.Node)
		want   string
	}{
		{"no address", migrationdest.Policy{}, func(n *apiv1.Node) { n.Status.MigrationAddress = "" }, "target node b takes no migrations"},
		{"outside the networks", migrationdest.Policy{Networks: []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}}, nil,
			`migration address "10.0.0.2" is not in the networks`},
		{"a loopback address", migrationdest.Policy{}, func(n *apiv1.Node) { n.Status.MigrationAddress = "127.0.0.1" }, "loopback"},
		{"claimed twice", migrationdest.Policy{}, func(n *apiv1.Node) { n.Status.MigrationAddress = "10.0.0.3" }, "registered by node c too"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Options{Destinations: tc.policy}, []*apiv1.VirtualMachineInstance{runningVMI("vm1", "a")},
				newMigration("m1", "vm1", t0))
			if tc.node != nil {
				f.nodes.Update(t, "", "b", tc.node)
				f.sync()
			}
			for _, phase := range []string{apiv1.MigrationPending, apiv1.MigrationScheduling, apiv1.MigrationScheduled} {
				f.step("m1")
				f.wantPhase("m1", phase)
			}
			f.step("m1")
			m := f.wantPhase("m1", apiv1.MigrationFailed)
			if m.GetStatus().GetReason() != ReasonNoDestination || !strings.Contains(m.GetStatus().GetMessage(), tc.want) {
				t.Fatalf("failed with %s: %s; want %s saying %q", m.GetStatus().GetReason(), m.GetStatus().GetMessage(), ReasonNoDestination, tc.want)
			}
			if st := f.vmi("vm1").GetStatus().GetMigrationState(); st != nil {
				t.Fatalf("the instance was handed off: %v", st)
			}
		})
	}
}
