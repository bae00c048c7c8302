package provider_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

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

// Acceptance tests of virtplane_storage_class. The agent does not contact
// Ceph to hold a class, so no cluster is needed: the keys are made up, in
// the shape `ceph-authtool --gen-print-key` prints.

const (
	rbdClassAddr    = "virtplane_storage_class.rbd"
	sharedClassAddr = "virtplane_storage_class.shared"
	// Two keys as ceph-authtool --gen-print-key prints them, and one of
	// their length that is no AES key.
	accCephKey      = "AQCauhZroSmaLxAADcjclatTLvDt1b2rQ3bj4Q=="
	accCephKey2     = "AQDMwRZoAAAAABAAb3QxJ6b6s0n0fYtq9B9pCg=="
	accBadShapedKey = "AgCauhZroSmaLxAADcjclatTLvDt1b2rQ3bj4Q=="
)

// rbdClassHCL is an rbd class "rbd" named name; monitors is HCL.
func rbdClassHCL(name, monitors, pool, key, selector string) string {
	return fmt.Sprintf(`
resource "virtplane_storage_class" "rbd" {
  name = %q
  rbd {
    monitors = %s
    pool     = %q
    user     = "virtplane"
    key      = %q
  }
  %s
}
`, name, monitors, pool, key, selector)
}

func sharedClassHCL(name, path string) string {
	return fmt.Sprintf(`
resource "virtplane_storage_class" "shared" {
  name = %q
  shared_filesystem {
    path = %q
  }
}
`, name, path)
}

// agentKey is the key the agent holds for class name (Connect: an admin
// may read it, as the nodes the class selects do).
func agentKey(t *testing.T, agent *acctest.Agent, name string) string {
	t.Helper()
	c, err := agent.Client.StorageClasses.Connect(t.Context(), &apiv1.ConnectStorageClassRequest{Name: name})
	if err != nil {
		t.Fatalf("connect %s: %v", name, err)
	}
	return c.GetStorageClass().GetSpec().GetRbd().GetKey()
}

// keyIs checks the agent holds key for class name.
func keyIs(t *testing.T, agent *acctest.Agent, name, key string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		if got := agentKey(t, agent, name); got != key {
			return fmt.Errorf("the agent holds another key for %s than configured (%d characters)", name, len(got))
		}
		return nil
	}
}

// checkClassesDestroyed verifies destroy left no storage class behind.
func checkClassesDestroyed(t *testing.T, agent *acctest.Agent) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		for _, rs := range s.RootModule().Resources {
			if rs.Type != "virtplane_storage_class" {
				continue
			}
			_, err := agent.Client.StorageClasses.Get(t.Context(), &apiv1.GetStorageClassRequest{Name: rs.Primary.Attributes["name"]})
			if status.Code(err) != codes.NotFound {
				return fmt.Errorf("storage class %s still exists after destroy (err %v)", rs.Primary.Attributes["name"], err)
			}
		}
		return nil
	}
}

// A class of each kind; bad input refused at plan time on the attribute,
// the key never quoted; the node selector and the key change in place, the
// pool replaces the class; import by name (the next apply writes the key);
// the data source never has the key; a VM's disk on a class, whose class
// cannot change.
func TestAccStorageClass(t *testing.T) {
	agent := acctest.SharedAgent(t)
	rbdName, sharedName, vmName := acctest.RandomName("sc"), acctest.RandomName("sc"), acctest.RandomName("scvm")
	mons := `["10.0.0.1:3300", "10.0.0.2:3300"]`
	sel := `node_selector = { "example.com/ceph" = "true" }`
	classes := func(pool, key, selector string) string {
		return agent.ProviderConfig() + rbdClassHCL(rbdName, mons, pool, key, selector) + sharedClassHCL(sharedName, "/mnt/vms")
	}
	withVM := func(cfg, class string) string {
		return cfg + fmt.Sprintf(`
resource "virtplane_virtual_machine" "test" {
  name         = %q
  run_strategy = "Halted"
  memory       = "64Mi"
  disk {
    name = "data"
    persistent {
      size          = "64Mi"
      storage_class = %s
    }
  }
}
`, vmName, class)
	}
	var uid string
	sameUID := func(same bool) resource.TestCheckFunc {
		return func(s *terraform.State) error {
			got := s.RootModule().Resources[rbdClassAddr].Primary.Attributes["uid"]
			if (got == uid) != same {
				return fmt.Errorf("uid %s after %s (same wanted: %v)", got, uid, same)
			}
			uid = got
			return nil
		}
	}
	bad := func(cfg string, parts ...string) resource.TestStep {
		return resource.TestStep{Config: agent.ProviderConfig() + cfg, PlanOnly: true, ExpectError: errorRe(parts...)}
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             resource.ComposeTestCheckFunc(checkClassesDestroyed(t, agent), checkDestroyed(t, agent)),
		Steps: []resource.TestStep{
			bad(rbdClassHCL(rbdName, `["ceph-mon-1:3300"]`, "vms", accCephKey, ""),
				`Invalid monitors`, `rbd.monitors[0] "ceph-mon-1:3300": must be IP:port (an IP literal`),
			bad(rbdClassHCL(rbdName, mons, "vms", accBadShapedKey, ""),
				`Invalid key`, `rbd.key "(hidden)": must be a cephx key`),
			bad(rbdClassHCL("local", mons, "vms", accCephKey, ""),
				`Invalid name`, `name "local": local is the built-in class`),
			bad(rbdClassHCL(rbdName, mons, "vms/x", accCephKey, ""), `rbd.pool "vms/x": must be 1-100 letters`),
			bad(rbdClassHCL(rbdName, mons, "vms", accCephKey, "shared_filesystem {\n path = \"/mnt\"\n }"),
				`set exactly one of rbd and shared_filesystem`),
			bad(`resource "virtplane_storage_class" "rbd" {
  name = "x"
  rbd {
    monitors = ["10.0.0.1:3300"]
    pool     = "vms"
    user     = "virtplane"
  }
}`, `Missing key`, `rbd.key is required in the rbd block`),
			{
				Config: classes("vms", accCephKey, sel),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(rbdClassAddr, tfjsonpath.New("id"), knownvalue.StringExact(rbdName)),
					statecheck.ExpectKnownValue(rbdClassAddr, tfjsonpath.New("key_set"), knownvalue.Bool(true)),
					// Made-up monitors: never ready (whether the agent has
					// judged the class yet, and says why, is a race).
					statecheck.ExpectKnownValue(rbdClassAddr, tfjsonpath.New("ready"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue(sharedClassAddr, tfjsonpath.New("key_set"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue(sharedClassAddr, tfjsonpath.New("shared_filesystem").AtMapKey("path"), knownvalue.StringExact("/mnt/vms")),
					statecheck.ExpectKnownValue(sharedClassAddr, tfjsonpath.New("node_selector"), knownvalue.Null()),
				},
				Check: resource.ComposeTestCheckFunc(keyIs(t, agent, rbdName, accCephKey), sameUID(false)),
			},
			{
				// The node selector changes in place.
				Config: classes("vms", accCephKey, `node_selector = { "example.com/ceph" = "yes" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(rbdClassAddr, plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction(sharedClassAddr, plancheck.ResourceActionNoop),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(rbdClassAddr, tfjsonpath.New("node_selector"),
						knownvalue.MapExact(map[string]knownvalue.Check{"example.com/ceph": knownvalue.StringExact("yes")})),
				},
				Check: resource.ComposeTestCheckFunc(keyIs(t, agent, rbdName, accCephKey), sameUID(true)),
			},
			{
				// So does the key, and the monitors; a key read from a file
				// keeps its newline, which is no part of it.
				PreConfig: func() {
					if err := os.WriteFile(filepath.Join(os.TempDir(), rbdName+".key"), []byte(accCephKey2+"\n"), 0o600); err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = os.Remove(filepath.Join(os.TempDir(), rbdName+".key")) })
				},
				Config: strings.Replace(classes("vms", "KEY", sel), `"KEY"`, fmt.Sprintf("file(%q)", filepath.Join(os.TempDir(), rbdName+".key")), 1),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(rbdClassAddr, plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeTestCheckFunc(keyIs(t, agent, rbdName, accCephKey2), sameUID(true)),
			},
			{
				// Another pool: the class is replaced.
				Config: classes("vms2", accCephKey2, sel),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(rbdClassAddr, plancheck.ResourceActionDestroyBeforeCreate),
				}},
				Check: resource.ComposeTestCheckFunc(keyIs(t, agent, rbdName, accCephKey2), sameUID(false)),
			},
			{
				// Import by name: everything but the key, which no read
				// returns (and what the agent judges of the class, which
				// may change between the two reads).
				ResourceName:            rbdClassAddr,
				ImportState:             true,
				ImportStateId:           rbdName,
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"rbd.key", "ready", "message"},
			},
			{
				// Forgotten by Terraform, kept by the agent ...
				Config: agent.ProviderConfig() + sharedClassHCL(sharedName, "/mnt/vms") + `
removed {
  from = virtplane_storage_class.rbd
  lifecycle {
    destroy = false
  }
}
`,
				Check: keyIs(t, agent, rbdName, accCephKey2),
			},
			{
				// ... and imported.
				Config:             classes("vms2", accCephKey, sel),
				ResourceName:       rbdClassAddr,
				ImportState:        true,
				ImportStateId:      rbdName,
				ImportStatePersist: true,
				// The states are the whole state's, the shared class too.
				ImportStateCheck: func(states []*terraform.InstanceState) error {
					for _, s := range states {
						if a := s.Attributes; a["name"] == rbdName {
							if a["rbd.key"] != "" || a["rbd.pool"] != "vms2" || a["key_set"] != "true" {
								return fmt.Errorf("imported: key %q pool %q key_set %q", a["rbd.key"], a["rbd.pool"], a["key_set"])
							}
							return nil
						}
					}
					return fmt.Errorf("%s is not among the %d states", rbdName, len(states))
				},
			},
			{
				// After the import the state has no key: the next apply
				// writes the configured one, in place.
				Config: classes("vms2", accCephKey, sel),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(rbdClassAddr, plancheck.ResourceActionUpdate),
				}},
				Check: resource.ComposeTestCheckFunc(keyIs(t, agent, rbdName, accCephKey), sameUID(true)),
			},
			{
				Config:           classes("vms2", accCephKey, sel),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				// The data source: where, never the key.
				Config: classes("vms2", accCephKey, sel) + `
data "virtplane_storage_class" "rbd" {
  name = virtplane_storage_class.rbd.name
}
`,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.virtplane_storage_class.rbd", tfjsonpath.New("rbd"), knownvalue.ObjectExact(map[string]knownvalue.Check{
						"monitors": knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("10.0.0.1:3300"), knownvalue.StringExact("10.0.0.2:3300")}),
						"pool":     knownvalue.StringExact("vms2"),
						"user":     knownvalue.StringExact("virtplane"),
					})),
					statecheck.ExpectKnownValue("data.virtplane_storage_class.rbd", tfjsonpath.New("key_set"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue("data.virtplane_storage_class.rbd", tfjsonpath.New("shared_filesystem"), knownvalue.Null()),
				},
			},
			{
				// A VM's disk on the class.
				Config: withVM(classes("vms2", accCephKey, sel), "virtplane_storage_class.rbd.name"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(vmAddr, tfjsonpath.New("disk").AtSliceIndex(0).AtMapKey("persistent").AtMapKey("storage_class"),
						knownvalue.StringExact(rbdName)),
				},
				Check: func(*terraform.State) error {
					vm, _, err := apiVM(t.Context(), agent, "default", vmName)
					if err != nil {
						return err
					}
					if got := vm.GetSpec().GetTemplate().GetSpec().GetVolumes()[0].GetPersistent().GetStorageClass(); got != rbdName {
						return fmt.Errorf("the VM's volume is on %q", got)
					}
					return nil
				},
			},
			{
				// ... whose class cannot change: refused at plan time.
				Config:   withVM(classes("vms2", accCephKey, sel), "virtplane_storage_class.shared.name"),
				PlanOnly: true,
				ExpectError: errorRe(`Storage class of a persistent disk cannot change`,
					fmt.Sprintf(`disk[0].persistent.storage_class %q: may not change from %s to %s`, sharedName, rbdName, sharedName)),
			},
			{
				Config:      withVM(classes("vms2", accCephKey, sel), `"local"`),
				PlanOnly:    true,
				ExpectError: errorRe(fmt.Sprintf(`may not change from %s to local`, rbdName)),
			},
			{
				Config:           withVM(classes("vms2", accCephKey, sel), "virtplane_storage_class.rbd.name"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
		},
	})
}

// The key is in the state (Terraform keeps every sensitive value there)
// but never in what the terraform CLI prints: plan, apply, show, state
// show, a plan changing it. Run with the real CLI, whose human-readable
// output the test framework does not show.
func TestAccStorageClassKeyNeverPrinted(t *testing.T) {
	agent := acctest.SharedAgent(t)
	t.Parallel()
	cli := acctest.NewCLI(t)
	name := acctest.RandomName("sc")
	cfg := func(key string) string {
		return agent.ProviderConfig() + rbdClassHCL(name, `["10.0.0.1:3300"]`, "vms", key, "")
	}
	printed := func(what, out string) {
		t.Helper()
		if strings.Contains(out, accCephKey) || strings.Contains(out, accCephKey2) {
			t.Errorf("%s prints the key:\n%s", what, out)
		}
	}
	cli.WriteConfig(cfg(accCephKey))
	cli.MustRun("init", "-no-color", "-input=false")
	out := cli.MustRun("plan", "-no-color", "-input=false")
	printed("plan", out)
	if !regexp.MustCompile(`key\s+= \(sensitive value\)`).MatchString(out) {
		t.Errorf("plan does not show the key as sensitive:\n%s", out)
	}
	t.Cleanup(func() { _, _ = cli.Run("destroy", "-auto-approve", "-no-color", "-input=false") })
	printed("apply", cli.MustRun("apply", "-auto-approve", "-no-color", "-input=false"))
	printed("show", cli.MustRun("show", "-no-color"))
	printed("state show", cli.MustRun("state", "show", "-no-color", rbdClassAddr))
	state, err := os.ReadFile(filepath.Join(cli.Dir(), "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(state), accCephKey) || !strings.Contains(string(state), `"sensitive_attributes"`) {
		t.Errorf("the state file does not keep the key as a sensitive value:\n%s", state)
	}

	cli.WriteConfig(cfg(accCephKey2))
	out = cli.MustRun("plan", "-no-color", "-input=false")
	printed("plan of a new key", out)
	if !strings.Contains(out, "update in-place") || !regexp.MustCompile(`~ key\s+= \(sensitive value\)`).MatchString(out) {
		t.Errorf("a new key is not an in-place update of a sensitive value:\n%s", out)
	}
	printed("apply of a new key", cli.MustRun("apply", "-auto-approve", "-no-color", "-input=false"))
	if got := agentKey(t, agent, name); got != accCephKey2 {
		t.Errorf("the agent holds another key than the new one (%d characters)", len(got))
	}
	printed("destroy", cli.MustRun("destroy", "-auto-approve", "-no-color", "-input=false"))
	if _, err := agent.Client.StorageClasses.Get(t.Context(), &apiv1.GetStorageClassRequest{Name: name}); status.Code(err) != codes.NotFound {
		t.Errorf("the class outlives destroy (err %v)", err)
	}
}
