package provider_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

// Acceptance tests of virtplane_image on the real node agent, which pulls
// images from a loopback HTTP server of the test's.

const imageAddr = "virtplane_image.test"

// imageVirtualSize is the size of the served qcow2 as the guest sees it.
const imageVirtualSize = 64 << 20

// imageSource is a qcow2 served over HTTP on loopback.
type imageSource struct {
	url, sha256 string
}

// serveQCOW2 makes an empty qcow2 with qemu-img and serves it.
func serveQCOW2(t *testing.T) imageSource {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "disk.qcow2")
	if out, err := exec.CommandContext(t.Context(), "qemu-img", "create", "-q", "-f", "qcow2", file, fmt.Sprint(imageVirtualSize)).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v: %s", err, out)
	}
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	return imageSource{url: srv.URL + "/disk.qcow2", sha256: hex.EncodeToString(h.Sum(nil))}
}

// realImageAgent is the agent, for tests that need nodes that pull
// images: the real node agent. Fake nodes do not pull, and an external
// agent's nodes cannot reach the test's loopback server.
func realImageAgent(t *testing.T) *acctest.Agent {
	t.Helper()
	agent := acctest.SharedAgent(t)
	if !agent.Nodes.Real() {
		t.Skip("virtplane_image needs the real node agent, which pulls images (make testacc runs it)")
	}
	return agent
}

// imageBlock renders a virtplane_image "test" block; extra goes inside.
func imageBlock(name, url, extra string) string {
	return fmt.Sprintf(`
resource "virtplane_image" "test" {
  name = %q
  url  = %q
  %s
  timeouts {
    create = "3m"
    update = "3m"
  }
}
`, name, url, extra)
}

// nodeStatusReady checks that every harness node reports the image Ready
// with the served checksum.
func nodeStatusReady(agent *acctest.Agent, sum string) statecheck.StateCheck {
	entries := make([]knownvalue.Check, 0, len(agent.Nodes.Names))
	for _, n := range agent.Nodes.Names {
		entries = append(entries, knownvalue.ObjectPartial(map[string]knownvalue.Check{
			"node":               knownvalue.StringExact(n),
			"phase":              knownvalue.StringExact("Ready"),
			"sha256":             knownvalue.StringExact(sum),
			"format":             knownvalue.StringExact("qcow2"),
			"virtual_size_bytes": knownvalue.Int64Exact(imageVirtualSize),
			"size_bytes":         knownvalue.NotNull(),
		}))
	}
	return statecheck.ExpectKnownValue(imageAddr, tfjsonpath.New("node_status"), knownvalue.ListExact(entries))
}

// imageFile checks whether the node's image directory holds the image,
// with the served checksum.
func imageFile(agent *acctest.Agent, name, sum string, want bool) resource.TestCheckFunc {
	return func(*terraform.State) error {
		b, err := os.ReadFile(filepath.Join(agent.Nodes.ImageDir(), name))
		switch {
		case !want && errors.Is(err, os.ErrNotExist):
			return nil
		case !want:
			return fmt.Errorf("the node holds image %s (err %v)", name, err)
		case err != nil:
			return fmt.Errorf("the node does not hold image %s: %w", name, err)
		}
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != sum {
			return fmt.Errorf("the node's %s has sha256 %x, want %s", name, got, sum)
		}
		return nil
	}
}

// checkImagesDestroyed verifies destroy left no Image behind.
func checkImagesDestroyed(t *testing.T, agent *acctest.Agent) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		for _, rs := range s.RootModule().Resources {
			if rs.Type != "virtplane_image" {
				continue
			}
			_, err := agent.Client.Images.Get(t.Context(), &apiv1.GetImageRequest{Name: rs.Primary.Attributes["name"]})
			if status.Code(err) != codes.NotFound {
				return fmt.Errorf("image %s still exists after destroy (err %v)", rs.Primary.Attributes["name"], err)
			}
		}
		return nil
	}
}

// The life of an image every node pulls: create waits until the node has
// it (the file, with its checksum); import finds every attribute; the
// checksum in upper case is no change; nodes and labels change in place;
// the data source reads it; an image deleted behind Terraform's back is
// created again. After every step the framework checks the plan is empty.
func TestAccImage_lifecycle(t *testing.T) {
	agent := realImageAgent(t)
	src := serveQCOW2(t)
	name := acctest.RandomName("img") + ".qcow2"
	cfg := func(sum, nodes, labels, extra string) string {
		return agent.ProviderConfig() + imageBlock(name, src.url, fmt.Sprintf("sha256 = %q\n  nodes = %q\n  labels = %s", sum, nodes, labels)) + extra
	}
	const base = `{ role = "base" }`
	var uid string
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkImagesDestroyed(t, agent),
		Steps: []resource.TestStep{
			{
				Config: cfg(src.sha256, "all", base, ""),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(imageAddr, tfjsonpath.New("id"), knownvalue.StringExact(name)),
					statecheck.ExpectKnownValue(imageAddr, tfjsonpath.New("uid"), knownvalue.NotNull()),
					statecheck.ExpectKnownValue(imageAddr, tfjsonpath.New("format"), knownvalue.Null()),
					statecheck.ExpectKnownValue(imageAddr, tfjsonpath.New("wait_for_nodes"), knownvalue.Bool(true)),
					nodeStatusReady(agent, src.sha256),
				},
				Check: resource.ComposeTestCheckFunc(
					imageFile(agent, name, src.sha256, true),
					resource.TestCheckResourceAttrWith(imageAddr, "uid", func(v string) error { uid = v; return nil }),
				),
			},
			{
				ResourceName:      imageAddr,
				ImportState:       true,
				ImportStateVerify: true,
			},
			{
				// The agent keeps the checksum in lower case; upper case is
				// the same checksum, not a replacement.
				Config: cfg(strings.ToUpper(src.sha256), "all", base, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
			},
			{
				Config: cfg(src.sha256, "", `{ role = "golden" }`, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(imageAddr, plancheck.ResourceActionUpdate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(imageAddr, tfjsonpath.New("nodes"), knownvalue.StringExact("")),
					statecheck.ExpectKnownValue(imageAddr, tfjsonpath.New("labels"), knownvalue.MapExact(map[string]knownvalue.Check{
						"role": knownvalue.StringExact("golden"),
					})),
				},
				Check: resource.TestCheckResourceAttrWith(imageAddr, "uid", func(v string) error {
					if v != uid {
						return fmt.Errorf("uid %s, want %s: an update in place", v, uid)
					}
					return nil
				}),
			},
			{
				Config: cfg(src.sha256, "", `{ role = "golden" }`, `
data "virtplane_image" "test" {
  name = virtplane_image.test.name
}
`),
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckResourceAttrPair("data.virtplane_image.test", "uid", imageAddr, "uid"),
					resource.TestCheckResourceAttrPair("data.virtplane_image.test", "url", imageAddr, "url"),
					resource.TestCheckResourceAttrPair("data.virtplane_image.test", "sha256", imageAddr, "sha256"),
					resource.TestCheckResourceAttr("data.virtplane_image.test", "nodes", ""),
					resource.TestCheckResourceAttr("data.virtplane_image.test", "labels.role", "golden"),
					resource.TestCheckResourceAttr("data.virtplane_image.test", "node_status.0.phase", "Ready"),
				),
			},
			{
				// Deleted behind Terraform's back: the plan creates it again.
				PreConfig: func() {
					if _, err := agent.Client.Images.Delete(t.Context(), &apiv1.DeleteImageRequest{Name: name}); err != nil {
						t.Fatalf("delete image %s: %v", name, err)
					}
				},
				Config: cfg(src.sha256, "all", base, ""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(imageAddr, plancheck.ResourceActionCreate),
				}},
				ConfigStateChecks: []statecheck.StateCheck{nodeStatusReady(agent, src.sha256)},
				Check: resource.ComposeTestCheckFunc(
					imageFile(agent, name, src.sha256, true),
					resource.TestCheckResourceAttrWith(imageAddr, "uid", func(v string) error {
						if v == uid {
							return fmt.Errorf("uid %s unchanged: the image was not created again", v)
						}
						return nil
					}),
				),
			},
		},
	})
}

// A wrong checksum fails create with the node's reason, and the node
// keeps nothing under the image's name; fixing the checksum replaces the
// tainted image.
func TestAccImage_checksumMismatch(t *testing.T) {
	agent := realImageAgent(t)
	src := serveQCOW2(t)
	name := acctest.RandomName("bad") + ".qcow2"
	wrong := strings.Repeat("0", 64)
	cfg := func(sum string) string {
		return agent.ProviderConfig() + imageBlock(name, src.url, fmt.Sprintf("sha256 = %q\n  nodes = \"all\"", sum))
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkImagesDestroyed(t, agent),
		Steps: []resource.TestStep{
			{
				Config:      cfg(wrong),
				ExpectError: errorRe("Image "+name+" could not be pulled", "checksum mismatch", "expected "+wrong),
			},
			{
				PreConfig: func() {
					if err := imageFile(agent, name, "", false)(nil); err != nil {
						t.Fatal(err)
					}
				},
				Config: cfg(src.sha256),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(imageAddr, plancheck.ResourceActionReplace),
				}},
				ConfigStateChecks: []statecheck.StateCheck{nodeStatusReady(agent, src.sha256)},
				Check:             imageFile(agent, name, src.sha256, true),
			},
		},
	})
}

// A VM names an image pulled on demand: its node pulls it before the
// instance starts, and the VM runs. Destroying the image while the VM
// uses it is refused with a clear reason.
func TestAccImage_usedByVM(t *testing.T) {
	agent := realImageAgent(t)
	src := serveQCOW2(t)
	name := acctest.RandomName("vm") + ".qcow2"
	vmName := acctest.RandomName("imgvm")
	image := imageBlock(name, src.url, fmt.Sprintf("sha256 = %q", src.sha256))
	vm := func(disk string) string {
		return vmConfig(agent, vmName, guestBody(agent, guestMemory, fmt.Sprintf("disk {\n    name  = \"data\"\n    image = %s\n  }", disk)))
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy: resource.ComposeTestCheckFunc(
			checkDestroyed(t, agent),
			checkImagesDestroyed(t, agent),
		),
		Steps: []resource.TestStep{
			{
				Config:            vm("virtplane_image.test.name") + image,
				ConfigStateChecks: []statecheck.StateCheck{expectStatus(apiv1.PrintableRunning)},
				Check: resource.ComposeTestCheckFunc(
					imageFile(agent, name, src.sha256, true),
					guestBooted(t, agent, vmName, ""),
				),
			},
			{
				// A refresh shows the pull the VM's node made.
				Config:            vm("virtplane_image.test.name") + image,
				ConfigStateChecks: []statecheck.StateCheck{nodeStatusReady(agent, src.sha256)},
			},
			{
				// The image leaves the configuration, but the VM still names
				// it: destroy is refused, naming the VM.
				Config:      vm(fmt.Sprintf("%q", name)),
				ExpectError: errorRe("Image "+name+" is in use", "vm default/"+vmName),
			},
			{
				Config: vm("virtplane_image.test.name") + image,
			},
		},
	})
}

// nodeEntryIs waits until every harness node's entry for image name is
// in phase, with a message holding msg.
func nodeEntryIs(t *testing.T, agent *acctest.Agent, name, phase, msg string) {
	t.Helper()
	testutil.EventuallyNoError(t, time.Minute, "image "+name+" "+phase+" on every node", func() error {
		img, err := agent.Client.Images.Get(t.Context(), &apiv1.GetImageRequest{Name: name})
		if err != nil {
			return err
		}
		got := 0
		for _, e := range img.GetStatus().GetNodes() {
			if e.GetPhase() == phase && strings.Contains(e.GetMessage(), msg) {
				got++
			}
		}
		if got != len(agent.Nodes.Names) {
			return fmt.Errorf("entries %v", img.GetStatus().GetNodes())
		}
		return nil
	})
}

// A max_size above the agent's cap is refused on the attribute, and
// nothing is created.
func TestAccImage_maxSizeAboveCap(t *testing.T) {
	agent := acctest.SharedAgent(t)
	name := acctest.RandomName("cap") + ".qcow2"
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkImagesDestroyed(t, agent),
		Steps: []resource.TestStep{{
			Config:      agent.ProviderConfig() + imageBlock(name, "https://images.example/x.qcow2", `max_size = "200Gi"`),
			ExpectError: errorRe("max_size", "must be at most 100Gi", "--image-max-size-cap"),
		}},
	})
}

// max_size below the image's size: every node refuses the download for
// good and keeps nothing; raised in place, the nodes pull it.
func TestAccImage_maxSize(t *testing.T) {
	agent := realImageAgent(t)
	src := serveQCOW2(t)
	name := acctest.RandomName("max") + ".qcow2"
	cfg := func(maxSize string) string {
		return agent.ProviderConfig() + imageBlock(name, src.url,
			fmt.Sprintf("sha256 = %q\n  nodes = \"all\"\n  wait_for_nodes = false\n  max_size = %q", src.sha256, maxSize))
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy:             checkImagesDestroyed(t, agent),
		Steps: []resource.TestStep{
			{
				Config: cfg("64Ki"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(imageAddr, tfjsonpath.New("max_size"), knownvalue.StringExact("64Ki")),
				},
			},
			{
				PreConfig: func() {
					nodeEntryIs(t, agent, name, "Failed", "more than max_size 64Ki")
					if err := imageFile(agent, name, "", false)(nil); err != nil {
						t.Fatal(err)
					}
				},
				// A larger max_size changes in place.
				Config: cfg("2Mi"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(imageAddr, plancheck.ResourceActionUpdate),
				}},
			},
			{
				// The same value in another spelling is no change.
				PreConfig: func() { nodeEntryIs(t, agent, name, "Ready", "") },
				Config:    cfg("2048Ki"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectEmptyPlan(),
				}},
				ConfigStateChecks: []statecheck.StateCheck{nodeStatusReady(agent, src.sha256)},
				Check:             imageFile(agent, name, src.sha256, true),
			},
		},
	})
}
