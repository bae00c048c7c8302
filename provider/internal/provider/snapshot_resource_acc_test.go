package provider_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/compare"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

// Acceptance tests of virtplane_virtual_machine_snapshot, its data
// source, virtplane_virtual_machine_restore and
// virtplane_virtual_machine.source_snapshot.

const (
	snapAddr    = "virtplane_virtual_machine_snapshot.test"
	restoreAddr = "virtplane_virtual_machine_restore.test"
	copyAddr    = "virtplane_virtual_machine.copy"
)

// snapVM renders a virtplane_virtual_machine "label" named name with a
// persistent volume "data", an interface and the test guest; extra goes
// inside it.
func snapVM(agent *acctest.Agent, label, name, extra string) string {
	return fmt.Sprintf(`
resource "virtplane_virtual_machine" %q {
  name = %q
  %s
  termination_grace_period = 10
  disk {
    name = "data"
    persistent {
      size = "16Mi"
    }
  }
  interface {
    name = "default"
  }
  %s
}
`, label, name, agent.Nodes.NodeSelectorHCL(), guestBody(agent, guestMemory, extra))
}

// snapBlock renders virtplane_virtual_machine_snapshot "test" named name
// of the VM expression vm.
func snapBlock(name, vm, extra string) string {
	return fmt.Sprintf(`
resource "virtplane_virtual_machine_snapshot" "test" {
  name            = %q
  virtual_machine = %s
  %s
}
`, name, vm, extra)
}

// testSnapshots runs steps in parallel with the other tests and checks
// that destroy leaves no VM, snapshot, snapshot data or restore behind.
func testSnapshots(t *testing.T, agent *acctest.Agent, steps []resource.TestStep) {
	t.Helper()
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             resource.ComposeTestCheckFunc(checkDestroyed(t, agent), checkSnapshotsDestroyed(t, agent)),
		Steps:                    steps,
	})
}

// checkSnapshotsDestroyed verifies destroy removed every snapshot and its
// content (the record of its data, which goes once the node removed the
// data), and every restore record.
func checkSnapshotsDestroyed(t *testing.T, agent *acctest.Agent) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		c := agent.Client
		for _, rs := range s.RootModule().Resources {
			a := rs.Primary.Attributes
			key := &apiv1.ObjectKey{Namespace: a["namespace"], Name: a["name"]}
			var err error
			switch rs.Type {
			case "virtplane_virtual_machine_snapshot":
				if _, err = c.Snapshots.Get(t.Context(), &apiv1.GetSnapshotRequest{Key: key}); status.Code(err) == codes.NotFound {
					_, err = c.SnapshotContents.Get(t.Context(), &apiv1.GetSnapshotContentRequest{
						Key: &apiv1.ObjectKey{Namespace: key.Namespace, Name: a["content_name"]}})
				}
			case "virtplane_virtual_machine_restore":
				_, err = c.Restores.Get(t.Context(), &apiv1.GetRestoreRequest{Key: key})
			default:
				continue
			}
			if status.Code(err) != codes.NotFound {
				return fmt.Errorf("%s %s/%s or its content still exists after destroy (err %v)", rs.Type, key.Namespace, key.Name, err)
			}
		}
		return nil
	}
}

// A snapshot of a running VM: create waits until it has succeeded (an
// online snapshot holding the persistent volume), the data source reads
// the same, import reads it back whole, changing its VM plans a
// replacement, and destroy removes it with its content.
func TestAccVirtualMachineSnapshot_lifecycle(t *testing.T) {
	agent := acctest.SharedAgent(t)
	vm, name := acctest.RandomName("snapvm"), acctest.RandomName("snap")
	cfg := func(source string) string {
		return agent.ProviderConfig() + snapVM(agent, "test", vm, "") + snapBlock(name, source, "") + `
data "virtplane_virtual_machine_snapshot" "test" {
  name = virtplane_virtual_machine_snapshot.test.name
}
`
	}
	str := func(attr, want string) statecheck.StateCheck {
		return statecheck.ExpectKnownValue(snapAddr, tfjsonpath.New(attr), knownvalue.StringExact(want))
	}
	testSnapshots(t, agent, []resource.TestStep{
		{
			Config: cfg("virtplane_virtual_machine.test.name"),
			ConfigStateChecks: []statecheck.StateCheck{
				str("phase", apiv1.SnapshotSucceeded),
				str("virtual_machine", vm),
				str("deletion_policy", apiv1.DeletionPolicyDelete),
				str("failure_deadline", "5m"),
				statecheck.ExpectKnownValue(snapAddr, tfjsonpath.New("ready_to_use"), knownvalue.Bool(true)),
				statecheck.ExpectKnownValue(snapAddr, tfjsonpath.New("included_volumes"), knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("data")})),
				statecheck.ExpectKnownValue(snapAddr, tfjsonpath.New("indications"), knownvalue.ListPartial(map[int]knownvalue.Check{0: knownvalue.StringExact(apiv1.IndicationOnline)})),
				statecheck.ExpectKnownValue(snapAddr, tfjsonpath.New("creation_time"), knownvalue.NotNull()),
				statecheck.CompareValuePairs(snapAddr, tfjsonpath.New("node_name"), vmAddr, tfjsonpath.New("status").AtMapKey("node"), compare.ValuesSame()),
				statecheck.CompareValuePairs(snapAddr, tfjsonpath.New("uid"), "data.virtplane_virtual_machine_snapshot.test", tfjsonpath.New("uid"), compare.ValuesSame()),
				statecheck.CompareValuePairs(snapAddr, tfjsonpath.New("content_name"), "data.virtplane_virtual_machine_snapshot.test", tfjsonpath.New("content_name"), compare.ValuesSame()),
				statecheck.ExpectKnownValue("data.virtplane_virtual_machine_snapshot.test", tfjsonpath.New("phase"), knownvalue.StringExact(apiv1.SnapshotSucceeded)),
			},
			Check: func(s *terraform.State) error {
				a := s.RootModule().Resources[snapAddr].Primary.Attributes
				if want := apiv1.SnapshotContentName(a["uid"]); a["content_name"] != want {
					return fmt.Errorf("content_name %q, want %q", a["content_name"], want)
				}
				content, err := agent.Client.SnapshotContents.Get(t.Context(), &apiv1.GetSnapshotContentRequest{
					Key: &apiv1.ObjectKey{Namespace: "default", Name: a["content_name"]}})
				if err != nil {
					return err
				}
				if got := content.GetStatus().GetVolumeBackups(); len(got) != 1 || got[0].GetVolumeName() != "data" {
					return fmt.Errorf("the content holds %v, want a copy of volume data", got)
				}
				return nil
			},
		},
		{
			ResourceName:      snapAddr,
			ImportState:       true,
			ImportStateId:     "default/" + name,
			ImportStateVerify: true,
		},
		{
			// The spec is immutable: another VM is another snapshot.
			Config:             cfg(`"other"`),
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
			ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(snapAddr, plancheck.ResourceActionReplace),
			}},
		},
	})
}

// A restore of a stopped VM: create waits until it is complete, the VM
// carries the restore's annotation, the next plan is empty (the VM's spec
// is the snapshot's, which is its configuration), and destroy deletes the
// record before the VM.
func TestAccVirtualMachineRestore(t *testing.T) {
	agent := acctest.SharedAgent(t)
	vm, snap, restore := acctest.RandomName("rvm"), acctest.RandomName("rsnap"), acctest.RandomName("restore")
	cfg := agent.ProviderConfig() + snapVM(agent, "test", vm, `run_strategy = "Halted"`) +
		snapBlock(snap, "virtplane_virtual_machine.test.name", "") + fmt.Sprintf(`
resource "virtplane_virtual_machine_restore" "test" {
  name            = %q
  virtual_machine = virtplane_virtual_machine.test.name
  snapshot        = virtplane_virtual_machine_snapshot.test.name
}
`, restore)
	testSnapshots(t, agent, []resource.TestStep{{
		Config: cfg,
		ConfigStateChecks: []statecheck.StateCheck{
			statecheck.ExpectKnownValue(restoreAddr, tfjsonpath.New("phase"), knownvalue.StringExact(apiv1.RestoreSucceeded)),
			statecheck.ExpectKnownValue(restoreAddr, tfjsonpath.New("complete"), knownvalue.Bool(true)),
			statecheck.ExpectKnownValue(restoreAddr, tfjsonpath.New("target_readiness_policy"), knownvalue.StringExact(apiv1.ReadinessWaitGracePeriod)),
			statecheck.ExpectKnownValue(restoreAddr, tfjsonpath.New("restore_time"), knownvalue.NotNull()),
		},
		Check: func(s *terraform.State) error {
			a := s.RootModule().Resources[restoreAddr].Primary.Attributes
			got, _, err := apiVM(t.Context(), agent, "default", vm)
			if err != nil {
				return err
			}
			if v, want := got.GetMetadata().GetAnnotations()[apiv1.AnnotationLastRestore], apiv1.LastRestoreValue(restore, a["uid"]); v != want {
				return fmt.Errorf("VM %s's %s is %q, want %q", vm, apiv1.AnnotationLastRestore, v, want)
			}
			if got.GetStatus().GetRestoreInProgress() != "" {
				return fmt.Errorf("VM %s is still locked by restore %s", vm, got.GetStatus().GetRestoreInProgress())
			}
			return nil
		},
	}})
}

// A VM started from a snapshot: its own VM, on the snapshot's node, with
// interfaces of MACs other than the source's, running as configured; the
// clone that made it is gone. Then it is halted like any VM.
func TestAccVirtualMachine_fromSnapshot(t *testing.T) {
	agent := acctest.SharedAgent(t)
	src, snap, cp := acctest.RandomName("srcvm"), acctest.RandomName("fsnap"), acctest.RandomName("copyvm")
	cfg := func(copyExtra string) string {
		return agent.ProviderConfig() + snapVM(agent, "test", src, "") +
			snapBlock(snap, "virtplane_virtual_machine.test.name", "") +
			snapVM(agent, "copy", cp, "source_snapshot = virtplane_virtual_machine_snapshot.test.name\n  "+copyExtra)
	}
	testSnapshots(t, agent, []resource.TestStep{
		{
			Config: cfg(""),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(copyAddr, tfjsonpath.New("status").AtMapKey("printable_status"), knownvalue.StringExact("Running")),
				statecheck.ExpectKnownValue(copyAddr, tfjsonpath.New("source_snapshot"), knownvalue.StringExact(snap)),
				statecheck.CompareValuePairs(copyAddr, tfjsonpath.New("status").AtMapKey("node"), snapAddr, tfjsonpath.New("node_name"), compare.ValuesSame()),
			},
			Check: resource.ComposeTestCheckFunc(
				differentMACs(t, agent, src, cp),
				cloneGone(t, agent, cp),
				guestBooted(t, agent, src, ""),
				guestBooted(t, agent, cp, ""),
			),
		},
		{
			Config: cfg(`run_strategy = "Halted"`),
			ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(copyAddr, plancheck.ResourceActionUpdate),
			}},
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(copyAddr, tfjsonpath.New("status").AtMapKey("printable_status"), knownvalue.StringExact("Stopped")),
			},
		},
	})
}

// differentMACs checks that VM b's interface MACs are set and none is one
// of VM a's.
func differentMACs(t *testing.T, agent *acctest.Agent, a, b string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		macs := func(name string) ([]string, error) {
			vm, _, err := apiVM(t.Context(), agent, "default", name)
			var out []string
			for _, i := range vm.GetSpec().GetTemplate().GetSpec().GetDomain().GetDevices().GetInterfaces() {
				out = append(out, i.GetMacAddress())
			}
			return out, err
		}
		am, err := macs(a)
		if err != nil {
			return err
		}
		bm, err := macs(b)
		if err != nil {
			return err
		}
		for _, m := range bm {
			if m == "" || slices.Contains(am, m) {
				return fmt.Errorf("VM %s has MACs %v, VM %s %v: want its own", b, bm, a, am)
			}
		}
		return nil
	}
}

// cloneGone checks that the clone that made VM name was deleted.
func cloneGone(t *testing.T, agent *acctest.Agent, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		_, err := agent.Client.Clones.Get(t.Context(), &apiv1.GetCloneRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: name}})
		if status.Code(err) != codes.NotFound {
			return fmt.Errorf("clone %s is still there (err %v)", name, err)
		}
		return nil
	}
}

// On real nodes: an online snapshot of a booted guest, and a VM started
// from it that boots too (its volume a copy of the source's).
func TestAccVirtualMachineSnapshot_realGuest(t *testing.T) {
	agent := acctest.SharedAgent(t)
	if !agent.Nodes.Real() {
		t.Skip("copies real volumes under libvirt; fake nodes only record the copy (make testacc runs it)")
	}
	src, snap, cp := acctest.RandomName("rgvm"), acctest.RandomName("rgsnap"), acctest.RandomName("rgcopy")
	testSnapshots(t, agent, []resource.TestStep{
		{
			Config: agent.ProviderConfig() + snapVM(agent, "test", src, ""),
			Check:  guestBooted(t, agent, src, ""),
		},
		{
			Config: agent.ProviderConfig() + snapVM(agent, "test", src, "") +
				snapBlock(snap, "virtplane_virtual_machine.test.name", "") +
				snapVM(agent, "copy", cp, "source_snapshot = virtplane_virtual_machine_snapshot.test.name"),
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(snapAddr, tfjsonpath.New("indications"), knownvalue.ListPartial(map[int]knownvalue.Check{0: knownvalue.StringExact(apiv1.IndicationOnline)})),
				statecheck.ExpectKnownValue(snapAddr, tfjsonpath.New("included_volumes"), knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("data")})),
			},
			Check: resource.ComposeTestCheckFunc(guestBooted(t, agent, src, ""), guestBooted(t, agent, cp, ""), differentMACs(t, agent, src, cp)),
		},
	})
}

// Failed creates leave nothing behind: a snapshot past its deadline (its
// VM does not exist) and a restore into a running VM with FailImmediate
// are deleted again, with the controller's reason reported.
func TestAccVirtualMachineSnapshot_failures(t *testing.T) {
	agent := acctest.SharedAgent(t)
	vm, snap, bad, restore := acctest.RandomName("fvm"), acctest.RandomName("fsnap"), acctest.RandomName("nosrc"), acctest.RandomName("frestore")
	running := agent.ProviderConfig() + snapVM(agent, "test", vm, "")
	withSnap := running + snapBlock(snap, "virtplane_virtual_machine.test.name", "")
	testSnapshots(t, agent, []resource.TestStep{
		{
			Config:      running + snapBlock(bad, `"no-such-vm"`, `failure_deadline = "2s"`),
			ExpectError: errorRe("Virtual machine snapshot default/"+bad+" failed", "snapshot deadline exceeded"),
		},
		{
			Config: withSnap,
			Check:  resource.ComposeTestCheckFunc(gone(t, agent, "snapshot", bad), guestBooted(t, agent, vm, "")),
		},
		{
			Config: withSnap + fmt.Sprintf(`
resource "virtplane_virtual_machine_restore" "test" {
  name                    = %q
  virtual_machine         = virtplane_virtual_machine.test.name
  snapshot                = virtplane_virtual_machine_snapshot.test.name
  target_readiness_policy = "FailImmediate"
}
`, restore),
			ExpectError: errorRe("Virtual machine restore default/"+restore+" failed", "powered off"),
		},
		{
			Config: withSnap,
			Check:  gone(t, agent, "restore", restore),
		},
	})
}

// gone checks that the snapshot or restore name no longer exists.
func gone(t *testing.T, agent *acctest.Agent, kind, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		key := &apiv1.ObjectKey{Namespace: "default", Name: name}
		var err error
		if kind == "snapshot" {
			_, err = agent.Client.Snapshots.Get(t.Context(), &apiv1.GetSnapshotRequest{Key: key})
		} else {
			_, err = agent.Client.Restores.Get(t.Context(), &apiv1.GetRestoreRequest{Key: key})
		}
		if status.Code(err) != codes.NotFound {
			return fmt.Errorf("the failed %s %s is still there (err %v)", kind, name, err)
		}
		return nil
	}
}
