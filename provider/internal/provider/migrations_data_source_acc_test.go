package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

// migrationSettleTimeout bounds the migration controller's first look at
// a new migration, and its cleanup of a canceled one.
const migrationSettleTimeout = 30 * time.Second

// A running VM is migrated through the API to the node it runs on, the
// only node the added selector allows: the migration controller never
// targets the source, so the migration waits in Scheduling with reason
// Unschedulable, whatever the number of nodes. The data source reads it
// back by VM and by phase, and the VM itself plans no change meanwhile.
func TestAccMigrationsDataSource(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("mig")
	vmCfg := vmConfig(agent, name, guestBody(agent, guestMemory, ""))
	dsCfg := vmCfg + fmt.Sprintf(`
data "virtplane_migrations" "vm" {
  vm = virtplane_virtual_machine.test.name
}

data "virtplane_migrations" "scheduling" {
  namespace = "default"
  vm        = %[1]q
  phase     = "Scheduling"
  depends_on = [virtplane_virtual_machine.test]
}

data "virtplane_migrations" "running" {
  vm         = %[1]q
  phase      = "Running"
  depends_on = [virtplane_virtual_machine.test]
}
`, name)

	var migration string
	migrationChecks := func() []statecheck.StateCheck {
		one := knownvalue.ListExact([]knownvalue.Check{knownvalue.ObjectPartial(map[string]knownvalue.Check{
			"name":      knownvalue.StringFunc(func(s string) error { return equal(s, migration) }),
			"namespace": knownvalue.StringExact("default"),
			"vm":        knownvalue.StringExact(name),
			"phase":     knownvalue.StringExact(apiv1.MigrationScheduling),
			"reason":    knownvalue.StringExact("Unschedulable"),
			"message":   knownvalue.StringRegexp(regexp.MustCompile(`node\(s\) were the source`)),
			// Never handed to the nodes: nothing they report.
			"source_node": knownvalue.Null(), "target_node": knownvalue.Null(),
			"method": knownvalue.Null(), "start_time": knownvalue.Null(),
			"completed": knownvalue.Bool(false), "failed": knownvalue.Bool(false),
			"data_total_bytes": knownvalue.Null(), "downtime_ms": knownvalue.Null(),
		})})
		return []statecheck.StateCheck{
			statecheck.ExpectKnownValue("data.virtplane_migrations.vm", tfjsonpath.New("id"), knownvalue.StringExact("namespace=default;vm="+name)),
			statecheck.ExpectKnownValue("data.virtplane_migrations.vm", tfjsonpath.New("namespace"), knownvalue.StringExact("default")),
			statecheck.ExpectKnownValue("data.virtplane_migrations.vm", tfjsonpath.New("migrations"), one),
			statecheck.ExpectKnownValue("data.virtplane_migrations.scheduling", tfjsonpath.New("migrations"), one),
			statecheck.ExpectKnownValue("data.virtplane_migrations.running", tfjsonpath.New("migrations"), knownvalue.ListExact([]knownvalue.Check{})),
			expectStatus(apiv1.PrintableRunning),
		}
	}
	testVMs(t, agent, []resource.TestStep{
		{
			Config:            vmCfg,
			ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableRunning)},
			// Booted, so that destroy does not wait out the grace period
			// of a guest that cannot obey the power button yet.
			Check: guestBooted(t, agent, name, ""),
		},
		{
			PreConfig: func() { migration = migrateInPlace(t, agent, name) },
			Config:    dsCfg,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(vmAddr, plancheck.ResourceActionNoop),
			}},
			ConfigStateChecks: migrationChecks(),
		},
		{
			// Refreshed with the migration pending: still no change.
			Config: dsCfg,
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectEmptyPlan(),
			}},
			ConfigStateChecks: migrationChecks(),
		},
	})
}

func equal(got, want string) error {
	if got != want {
		return fmt.Errorf("got %q, want %q", got, want)
	}
	return nil
}

// migrateInPlace asks to migrate VM name to the node it runs on and waits
// until the migration controller reports it unschedulable; it returns the
// migration's name. The migration is canceled when the test ends.
func migrateInPlace(t *testing.T, agent *acctest.Agent, name string) string {
	t.Helper()
	_, vmi, err := apiVM(t.Context(), agent, "default", name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	node := vmi.GetStatus().GetNodeName()
	mig, err := agent.Client.VMs.Migrate(t.Context(), &apiv1.MigrateVirtualMachineRequest{
		Key:               &apiv1.ObjectKey{Namespace: "default", Name: name},
		AddedNodeSelector: map[string]string{apiv1.LabelNodeName: node},
	})
	if err != nil {
		t.Fatalf("migrate %s: %v", name, err)
	}
	key := &apiv1.ObjectKey{Namespace: "default", Name: mig.GetMetadata().GetName()}
	t.Cleanup(func() { cancelMigration(t, agent, key) })
	testutil.EventuallyNoError(t, migrationSettleTimeout, "migration "+key.Name+" to be unschedulable", func() error {
		m, err := agent.Client.Migrations.Get(t.Context(), &apiv1.GetMigrationRequest{Key: key})
		if err != nil {
			return err
		}
		if st := m.GetStatus(); st.GetPhase() != apiv1.MigrationScheduling || st.GetReason() != "Unschedulable" {
			return fmt.Errorf("phase %q, reason %q: %s", st.GetPhase(), st.GetReason(), st.GetMessage())
		}
		return nil
	})
	return key.Name
}

// cancelMigration deletes the migration and waits until the controller
// released it (its VM may be gone already).
func cancelMigration(t *testing.T, agent *acctest.Agent, key *apiv1.ObjectKey) {
	ctx, cancel := context.WithTimeout(context.Background(), migrationSettleTimeout+5*time.Second)
	defer cancel()
	if _, err := agent.Client.Migrations.Delete(ctx, &apiv1.DeleteMigrationRequest{Key: key}); err != nil && status.Code(err) != codes.NotFound {
		t.Errorf("cancel migration %s: %v", key.Name, err)
		return
	}
	testutil.EventuallyNoError(t, migrationSettleTimeout, "migration "+key.Name+" to be gone", func() error {
		m, err := agent.Client.Migrations.Get(ctx, &apiv1.GetMigrationRequest{Key: key})
		if status.Code(err) == codes.NotFound {
			return nil
		}
		return fmt.Errorf("still there in phase %q (err %v)", m.GetStatus().GetPhase(), err)
	})
}
