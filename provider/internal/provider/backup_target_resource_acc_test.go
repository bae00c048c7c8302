package provider_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo"
	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

// Acceptance tests of virtplane_backup_target and
// virtplane_virtual_machine_backup_schedule against the in-process agent:
// a directory target the server probes for real (a temporary directory),
// an S3 target whose endpoint answers nothing (held, never ready), and a
// schedule on the first.

const (
	dirTargetAddr = "virtplane_backup_target.dir"
	s3TargetAddr  = "virtplane_backup_target.s3"
	scheduleAddr  = "virtplane_virtual_machine_backup_schedule.nightly"
)

func backupTargetsHCL(dirName, dir, s3Name, secret string) string {
	return fmt.Sprintf(`
resource "virtplane_backup_target" "dir" {
  name = %q
  directory {
    path = %q
  }
}

resource "virtplane_backup_target" "s3" {
  name = %q
  s3 {
    endpoint   = "http://127.0.0.1:9"
    bucket     = "backups"
    prefix     = "a/b"
    access_key = "AKIAEXAMPLE"
    secret_key = %q
  }
}
`, dirName, dir, s3Name, secret)
}

func backupScheduleHCL(name, schedule string, keepLast int, suspend bool) string {
	return fmt.Sprintf(`
resource "virtplane_virtual_machine_backup_schedule" "nightly" {
  name            = %q
  virtual_machine = "db"
  target          = virtplane_backup_target.dir.name
  schedule        = %q
  suspend         = %v
  retention {
    keep_last = %d
  }
}
`, name, schedule, suspend, keepLast)
}

// secretIs checks the agent holds secret for target name (Connect: an
// admin may read it, as the nodes uploading a backup do).
func secretIs(t *testing.T, agent *acctest.Agent, name, secret string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		c, err := agent.Client.BackupTargets.Connect(t.Context(), &apiv1.ConnectBackupTargetRequest{Name: name})
		if err != nil {
			return err
		}
		if got := c.GetBackupTarget().GetSpec().GetS3().GetSecretKey(); got != secret {
			return fmt.Errorf("the agent holds another secret key for %s than configured (%d characters)", name, len(got))
		}
		return nil
	}
}

func checkBackupTargetsDestroyed(t *testing.T, agent *acctest.Agent) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		for _, rs := range s.RootModule().Resources {
			if rs.Type != "virtplane_backup_target" {
				continue
			}
			_, err := agent.Client.BackupTargets.Get(t.Context(), &apiv1.GetBackupTargetRequest{Name: rs.Primary.Attributes["name"]})
			if status.Code(err) != codes.NotFound {
				return fmt.Errorf("backup target %s still exists after destroy (err %v)", rs.Primary.Attributes["name"], err)
			}
		}
		return nil
	}
}

// Bad input is refused at plan time on the attribute (the secret never
// quoted); the targets are made, the directory one found ready by the
// server's probe; the secret key and the schedule change in place, the
// bucket replaces the target; both import.
func TestAccBackupTargetAndSchedule(t *testing.T) {
	agent := acctest.SharedAgent(t)
	dirName, s3Name, schedName := acctest.RandomName("bt"), acctest.RandomName("bt"), acctest.RandomName("bs")
	dir := t.TempDir()
	cfg := func(secret, schedule string, keepLast int) string {
		return agent.ProviderConfig() + backupTargetsHCL(dirName, dir, s3Name, secret) + backupScheduleHCL(schedName, schedule, keepLast, true)
	}
	bad := func(c string, parts ...string) resource.TestStep {
		return resource.TestStep{Config: agent.ProviderConfig() + c, PlanOnly: true, ExpectError: errorRe(parts...)}
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkBackupTargetsDestroyed(t, agent),
		Steps: []resource.TestStep{
			bad(`resource "virtplane_backup_target" "s3" {
  name = "x"
  s3 {
    endpoint   = "ftp://s3.example.com"
    bucket     = "backups"
    access_key = "AKIAEXAMPLE"
    secret_key = "has a space"
  }
}`, `s3.endpoint "ftp://s3.example.com": must be http:// or https://`),
			bad(`resource "virtplane_backup_target" "s3" {
  name = "x"
  s3 {
    endpoint   = "https://s3.example.com"
    bucket     = "backups"
    access_key = "AKIAEXAMPLE"
    secret_key = "has a space"
  }
}`, `s3.secret_key "(hidden)": must be 1-256 printable ASCII`),
			bad(`resource "virtplane_backup_target" "d" {
  name = "x"
  directory {
    path = "/mnt/../etc"
  }
}`, `directory.path "/mnt/../etc"`),
			bad(`resource "virtplane_backup_target" "d" {
  name = "x"
}`, `must set exactly one of the directory and s3`),
			bad(backupTargetsHCL(dirName, dir, s3Name, "x")+backupScheduleHCL("s", "@every 1s", 2, false), `Invalid schedule`, `an interval must be at least 10s`),
			{
				Config: cfg("s3cr3t-one", "@every 1h", 2),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(s3TargetAddr, tfjsonpath.New("key_set"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(dirTargetAddr, tfjsonpath.New("key_set"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue(scheduleAddr, tfjsonpath.New("id"), knownvalue.StringExact("default/"+schedName)),
					statecheck.ExpectKnownValue(scheduleAddr, tfjsonpath.New("retention").AtMapKey("keep_last"), knownvalue.Int64Exact(2)),
				},
				Check: secretIs(t, agent, s3Name, "s3cr3t-one"),
			},
			{
				// The server's probe: the directory target becomes ready,
				// which a refresh shows.
				PreConfig: func() {
					deadline := time.Now().Add(time.Minute)
					for {
						got, err := agent.Client.BackupTargets.Get(t.Context(), &apiv1.GetBackupTargetRequest{Name: dirName})
						if err == nil && apiv1.IsConditionTrue(got.GetStatus().GetConditions(), apiv1.ConditionReady) {
							return
						}
						if time.Now().After(deadline) {
							t.Fatalf("directory target not ready after a minute: %v %v", got.GetStatus(), err)
						}
						time.Sleep(100 * time.Millisecond)
					}
				},
				Check: func(s *terraform.State) error {
					if got := s.RootModule().Resources[dirTargetAddr].Primary.Attributes["ready"]; got != "true" {
						return fmt.Errorf("directory target ready %q", got)
					}
					return nil
				},
				RefreshState: true,
			},
			{
				// The secret key and the schedule change in place.
				Config: cfg("s3cr3t-two", "0 3 * * *", 3),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(s3TargetAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction(scheduleAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction(dirTargetAddr, plancheck.ResourceActionNoop),
				}},
				Check: secretIs(t, agent, s3Name, "s3cr3t-two"),
			},
			{
				// What the directory target holds: a backup another
				// cluster wrote there, listed by the data source.
				PreConfig: func() {
					st, err := repo.OpenDir(dir)
					if err != nil {
						t.Fatal(err)
					}
					m := &repo.Manifest{ID: "6f1c2a3e-0000-4000-8000-00000000acc1", Cluster: "elsewhere", VMNamespace: "prod", VMName: "db",
						VMUID: "6f1c2a3e-0000-4000-8000-00000000acc2", Created: time.Date(2026, 11, 23, 3, 0, 0, 0, time.UTC), Spec: []byte(`{}`)}
					if err := repo.New(st, repo.Options{}).PutManifest(t.Context(), m); err != nil {
						t.Fatal(err)
					}
				},
				Config: cfg("s3cr3t-two", "0 3 * * *", 3) + `
data "virtplane_backups" "dir" {
  target = virtplane_backup_target.dir.name
}
data "virtplane_backups" "other_vm" {
  target          = virtplane_backup_target.dir.name
  virtual_machine = "web"
}
`,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.virtplane_backups.dir", tfjsonpath.New("backups"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.ObjectPartial(map[string]knownvalue.Check{
							"id": knownvalue.StringExact("6f1c2a3e-0000-4000-8000-00000000acc1"), "cluster": knownvalue.StringExact("elsewhere"),
							"vm_name": knownvalue.StringExact("db"), "created": knownvalue.StringExact("2026-11-23T03:00:00Z"),
						}),
					})),
					statecheck.ExpectKnownValue("data.virtplane_backups.other_vm", tfjsonpath.New("backups"), knownvalue.ListSizeExact(0)),
				},
			},
			{
				ResourceName:            s3TargetAddr,
				ImportState:             true,
				ImportStateId:           s3Name,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"s3.secret_key", "ready", "message"},
			},
			{
				ResourceName:            scheduleAddr,
				ImportState:             true,
				ImportStateId:           "default/" + schedName,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"last_backup", "last_successful_backup", "next_time"},
			},
		},
	})
}
