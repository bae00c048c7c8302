package server

import (
	"context"
	"errors"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// With leader election the controllers get stores fenced to their term:
// once the term's election key is gone their writes are refused, while the
// API's own writes go on.
func TestControllerStoresAreFencedToTheTerm(t *testing.T) {
	got := make(chan Deps, 1)
	a := startAgent(t, Options{LeaderElect: true, Controllers: func(ctx context.Context, deps Deps) {
		got <- deps
		<-ctx.Done()
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var deps Deps
	select {
	case deps = <-got:
	case <-ctx.Done():
		t.Fatal("controllers did not start")
	}
	vm := &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec:     &apiv1.VirtualMachineSpec{RunStrategy: apiv1.RunStrategyHalted},
	}
	vm, err := deps.Stores.VMs.Create(ctx, vm)
	if err != nil {
		t.Fatalf("write in the term: %v", err)
	}

	// End the term as an expired lease would: the election key goes.
	if _, err := a.client.Delete(ctx, a.opts.EtcdPrefix+"/leader/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	vm.Spec.RunStrategy = apiv1.RunStrategyAlways
	if _, err := deps.Stores.VMs.Update(ctx, vm); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("controller write after the term: %v, want ErrNotLeader", err)
	}
	c, err := client.Dial(ctx, client.Config{Endpoint: "unix://" + a.opts.Socket})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.VMs.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: "web"}}); err != nil {
		t.Fatalf("API write after the term: %v", err)
	}
}
