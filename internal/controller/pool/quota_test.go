package pool

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/controllertest"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/storetest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// On real etcd with the server's accounting: a pool whose namespace's
// quota holds fewer VMs than it wants makes as many as fit, reports the
// refusal in ReplicaFailure, and makes the rest once the quota is raised.
func TestQuotaRefusalIsReportedAndRetried(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := storetest.Client(t)
	opts := store.Options{Prefix: storetest.Prefix(t), Accounting: true}
	pools := store.New(c, store.Pools, opts)
	vms := store.New(c, store.VirtualMachines, opts)
	vmis := store.New(c, store.VirtualMachineInstances, opts)
	nss := store.New(c, store.Namespaces, opts)
	two, four := int64(2), int64(4)
	if _, err := nss.Create(ctx, &apiv1.Namespace{Metadata: &apiv1.ObjectMeta{Name: "default"},
		Spec: &apiv1.NamespaceSpec{Quota: &apiv1.NamespaceQuota{Vms: &two}}}); err != nil {
		t.Fatal(err)
	}
	poolInf := informer.New(pools, store.ListOptions{}, controllertest.Discard())
	vmInf := informer.New(vms, store.ListOptions{}, controllertest.Discard())
	vmiInf := informer.New(vmis, store.ListOptions{}, controllertest.Discard())
	ctl := New(Options{}, poolInf, vmInf, vmiInf, pools, vms, vmis, controllertest.Discard())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context){poolInf.Run, vmInf.Run, vmiInf.Run, func(ctx context.Context) { ctl.Run(ctx, 2) }} {
		wg.Add(1)
		go func() { defer wg.Done(); run(ctx) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })

	p := newPool(4)
	p.Metadata.Finalizers = nil
	if _, err := pools.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	count := func(n int) error {
		got, _, err := vms.List(ctx, store.ListOptions{})
		if err != nil {
			return err
		}
		if len(got) != n {
			return fmt.Errorf("%d VMs, want %d", len(got), n)
		}
		return nil
	}
	testutil.EventuallyNoError(t, 20*time.Second, "2 VMs and the quota reported", func() error {
		if err := count(2); err != nil {
			return err
		}
		cur, err := pools.Get(ctx, "default", "web")
		if err != nil {
			return err
		}
		cond := apiv1.FindCondition(cur.GetStatus().GetConditions(), apiv1.ConditionReplicaFailure)
		if cond.GetReason() != apiv1.ReasonFailedScaleOut || !strings.Contains(cond.GetMessage(), "namespace default: exceeded quota: vms: requested 1, used 2, limited 2") {
			return fmt.Errorf("ReplicaFailure %v", cond)
		}
		return nil
	})
	if _, err := nss.GuaranteedUpdate(ctx, "", "default", func(n *apiv1.Namespace) (*apiv1.Namespace, error) {
		n.Spec.Quota.Vms = &four
		return n, nil
	}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyNoError(t, 30*time.Second, "4 VMs once the quota allows", func() error { return count(4) })
}
