package provider_test

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/provider/internal/acctest"
)

// What the pool and replica set acceptance tests share. Their templates
// label the replicas pool=<name> or rs=<name>.

// testReplicas runs steps in parallel with the other tests and checks
// that destroy leaves no pool or replica set behind, none of their VMs or
// instances, and on real nodes no domain of them.
func testReplicas(t *testing.T, agent *acctest.Agent, steps []resource.TestStep) {
	t.Helper()
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: acctest.ProtoV6ProviderFactories,
		CheckDestroy: func(s *terraform.State) error {
			for _, rs := range s.RootModule().Resources {
				ns, name := rs.Primary.Attributes["namespace"], rs.Primary.Attributes["name"]
				key := &apiv1.ObjectKey{Namespace: ns, Name: name}
				var err error
				var left int
				switch rs.Type {
				case "virtplane_virtual_machine_pool":
					if _, err = agent.Client.Pools.Get(t.Context(), &apiv1.GetPoolRequest{Key: key}); status.Code(err) != codes.NotFound {
						return fmt.Errorf("pool %s/%s still exists after destroy (err %v)", ns, name, err)
					}
					list, err := agent.Client.VMs.List(t.Context(), &apiv1.ListVirtualMachinesRequest{Options: &apiv1.ListOptions{
						Namespace: ns, LabelSelector: "pool=" + name,
					}})
					if err != nil {
						return err
					}
					left = len(list.GetItems())
				case "virtplane_virtual_machine_replica_set":
					if _, err = agent.Client.ReplicaSets.Get(t.Context(), &apiv1.GetReplicaSetRequest{Key: key}); status.Code(err) != codes.NotFound {
						return fmt.Errorf("replica set %s/%s still exists after destroy (err %v)", ns, name, err)
					}
					list, err := agent.Client.VMIs.List(t.Context(), &apiv1.ListVirtualMachineInstancesRequest{Options: &apiv1.ListOptions{
						Namespace: ns, LabelSelector: "rs=" + name,
					}})
					if err != nil {
						return err
					}
					left = len(list.GetItems())
				default:
					continue
				}
				if left > 0 {
					return fmt.Errorf("%s %s/%s was destroyed but %d of its replicas are left", rs.Type, ns, name, left)
				}
				waitNoDomain(t, agent, ns, name+"-")
			}
			return nil
		},
		Steps: steps,
	})
}
