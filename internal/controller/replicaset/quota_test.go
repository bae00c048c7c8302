package replicaset

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

// On real etcd with the server's accounting: a replica set whose
// namespace's quota holds fewer instances than it wants makes as many as
// fit, reports the quota's refusal in ReplicaFailure, and makes the rest
// once the quota is raised (its backoff retries, no hot loop needed).
func TestQuotaRefusalIsReportedAndRetried(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	c := storetest.Client(t)
	opts := store.Options{Prefix: storetest.Prefix(t), Accounting: true}
	rss := store.New(c, store.ReplicaSets, opts)
	vmis := store.New(c, store.VirtualMachineInstances, opts)
	nss := store.New(c, store.Namespaces, opts)
	three, five := int64(3), int64(5)
	if _, err := nss.Create(ctx, &apiv1.Namespace{Metadata: &apiv1.ObjectMeta{Name: "default"},
		Spec: &apiv1.NamespaceSpec{Quota: &apiv1.NamespaceQuota{Vms: &three}}}); err != nil {
		t.Fatal(err)
	}
	rsInf := informer.New(rss, store.ListOptions{}, controllertest.Discard())
	vmiInf := informer.New(vmis, store.ListOptions{}, controllertest.Discard())
	ctl := New(Options{BurstReplicas: 10}, rsInf, vmiInf, rss, vmis, controllertest.Discard())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context){rsInf.Run, vmiInf.Run, func(ctx context.Context) { ctl.Run(ctx, 3) }} {
		wg.Add(1)
		go func() { defer wg.Done(); run(ctx) }()
	}
	t.Cleanup(func() { cancel(); wg.Wait() })

	rs := newRS(5)
	rs.Metadata.Finalizers = nil
	if _, err := rss.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	instances := func(n int) error {
		got, _, err := vmis.List(ctx, store.ListOptions{})
		if err != nil {
			return err
		}
		if len(got) != n {
			return fmt.Errorf("%d instances, want %d", len(got), n)
		}
		return nil
	}
	testutil.EventuallyNoError(t, 20*time.Second, "3 instances and the quota reported", func() error {
		if err := instances(3); err != nil {
			return err
		}
		cur, err := rss.Get(ctx, "default", "web")
		if err != nil {
			return err
		}
		cond := apiv1.FindCondition(cur.GetStatus().GetConditions(), apiv1.ConditionReplicaFailure)
		if cond.GetReason() != apiv1.ReasonFailedCreate || !strings.Contains(cond.GetMessage(), "namespace default: exceeded quota: vms: requested 1, used 3, limited 3") {
			return fmt.Errorf("ReplicaFailure %v", cond)
		}
		return nil
	})
	if _, err := nss.GuaranteedUpdate(ctx, "", "default", func(n *apiv1.Namespace) (*apiv1.Namespace, error) {
		n.Spec.Quota.Vms = &five
		return n, nil
	}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyNoError(t, 30*time.Second, "5 instances once the quota allows", func() error { return instances(5) })
	ns, err := nss.Get(ctx, "", "default")
	if err != nil {
		t.Fatal(err)
	}
	if got := ns.GetStatus().GetUsed().GetVms(); got != 5 {
		t.Fatalf("namespace uses %d vms, want 5", got)
	}
}
