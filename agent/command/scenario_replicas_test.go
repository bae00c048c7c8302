package command

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/fakenode"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

func replicaTemplate(app string) *apiv1.VirtualMachineInstanceTemplateSpec {
	return &apiv1.VirtualMachineInstanceTemplateSpec{
		Metadata: &apiv1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec:     &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "64Mi"}}},
	}
}

// instancesOf lists the instances labelled app=app.
func (s *scenario) instancesOf(app string) []*apiv1.VirtualMachineInstance {
	s.t.Helper()
	list, err := s.c.VMIs.List(s.ctx, &apiv1.ListVirtualMachineInstancesRequest{Options: &apiv1.ListOptions{
		Namespace: "default", LabelSelector: "app=" + app}})
	if err != nil {
		s.t.Fatal(err)
	}
	return list.GetItems()
}

// writeCounter counts the store writes of the instances and the replica
// sets from a revision on, as their watches deliver them.
type writeCounter struct {
	mu         sync.Mutex
	vmis, sets int
}

func (s *scenario) countWrites(from int64) *writeCounter {
	s.t.Helper()
	w := &writeCounter{}
	opts := &apiv1.WatchOptions{ResourceVersion: from}
	vmiw, err := s.c.VMIs.Watch(s.ctx, &apiv1.WatchVirtualMachineInstancesRequest{Options: opts})
	if err != nil {
		s.t.Fatal(err)
	}
	rsw, err := s.c.ReplicaSets.Watch(s.ctx, &apiv1.WatchReplicaSetsRequest{Options: proto.Clone(opts).(*apiv1.WatchOptions)})
	if err != nil {
		s.t.Fatal(err)
	}
	go func() {
		for {
			if _, err := vmiw.Recv(); err != nil {
				return
			}
			w.mu.Lock()
			w.vmis++
			w.mu.Unlock()
		}
	}()
	go func() {
		for {
			if _, err := rsw.Recv(); err != nil {
				return
			}
			w.mu.Lock()
			w.sets++
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *writeCounter) get() (vmis, sets int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.vmis, w.sets
}

// A replica set of 200 on fake nodes: exactly 200 instances, all Ready;
// the time from create to 200 ready and the store writes per instance
// are logged (the figure).
func TestScenarioReplicaSetScaleUp200(t *testing.T) {
	s := newScenario(t, "rs-a", "rs-b", "rs-c", "rs-d", "rs-e", "rs-f", "rs-g", "rs-h")
	list, err := s.c.VMIs.List(s.ctx, &apiv1.ListVirtualMachineInstancesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	writes := s.countWrites(list.GetResourceVersion())
	const n = 200
	began := time.Now()
	_, err = s.c.ReplicaSets.Create(s.ctx, &apiv1.CreateReplicaSetRequest{ReplicaSet: &apiv1.VirtualMachineInstanceReplicaSet{
		Metadata: &apiv1.ObjectMeta{Name: "web"},
		Spec: &apiv1.VirtualMachineInstanceReplicaSetSpec{Replicas: proto.Int32(n),
			Selector: &apiv1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: replicaTemplate("web")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 2*time.Minute, "200 ready replicas", func() bool {
		rs, err := s.c.ReplicaSets.Get(s.ctx, &apiv1.GetReplicaSetRequest{Key: s.key("web")})
		return err == nil && rs.GetStatus().GetReadyReplicas() == n
	})
	took := time.Since(began)
	// Nothing more comes: no instance beyond 200, ever.
	testutil.ConsistentlyNoError(t, 2*time.Second, "exactly 200 instances", func() error {
		if got := len(s.instancesOf("web")); got != n {
			return fmt.Errorf("%d instances, want %d", got, n)
		}
		return nil
	})
	vmis, sets := writes.get()
	t.Logf("replica set of %d on 8 fake nodes: create to %d ready in %s; store writes per instance: %.2f instance writes + %.2f replica set writes",
		n, n, took.Round(time.Millisecond), float64(vmis)/n, float64(sets)/n)
}

func poolOf(name string, replicas int32, maxUnavailable string) *apiv1.VirtualMachinePool {
	return &apiv1.VirtualMachinePool{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Spec: &apiv1.VirtualMachinePoolSpec{
			Replicas:       proto.Int32(replicas),
			Selector:       &apiv1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			MaxUnavailable: maxUnavailable,
			VirtualMachineTemplate: &apiv1.VirtualMachineTemplateSpec{
				Metadata: &apiv1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: &apiv1.VirtualMachineSpec{RunStrategy: apiv1.RunStrategyAlways,
					Template: &apiv1.VirtualMachineInstanceTemplateSpec{
						Metadata: &apiv1.ObjectMeta{Labels: map[string]string{"app": name},
							Annotations: map[string]string{fakenode.AnnotationScript: ""}},
						Spec: &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "64Mi"}}},
					}},
			},
		},
	}
}

// poolVMs is the names of the VMs labelled app=pool, sorted.
func (s *scenario) poolVMs(pool string) []string {
	s.t.Helper()
	list, err := s.c.VMs.List(s.ctx, &apiv1.ListVirtualMachinesRequest{Options: &apiv1.ListOptions{Namespace: "default", LabelSelector: "app=" + pool}})
	if err != nil {
		s.t.Fatal(err)
	}
	var names []string
	for _, vm := range list.GetItems() {
		names = append(names, vm.GetMetadata().GetName())
	}
	sort.Strings(names)
	return names
}

func (s *scenario) waitPool(pool string, ready int32, names ...string) *apiv1.VirtualMachinePool {
	s.t.Helper()
	var p *apiv1.VirtualMachinePool
	testutil.EventuallyNoError(s.t, time.Minute, fmt.Sprintf("pool %s with %v ready", pool, names), func() error {
		var err error
		if p, err = s.c.Pools.Get(s.ctx, &apiv1.GetPoolRequest{Key: s.key(pool)}); err != nil {
			return err
		}
		if got := s.poolVMs(pool); fmt.Sprint(got) != fmt.Sprint(names) {
			return fmt.Errorf("VMs %v", got)
		}
		if st := p.GetStatus(); st.GetReadyReplicas() != ready || st.GetReplicas() != int32(len(names)) {
			return fmt.Errorf("status %v", st)
		}
		return nil
	})
	return p
}

// A pool on fake nodes: 3 → 5 → 2 removes the highest ordinals; a
// template change rolls through with one VM down at a time and each VM
// restarted once.
func TestScenarioPoolScaleAndRollingUpdate(t *testing.T) {
	s := newScenario(t, "pool-a", "pool-b")
	if _, err := s.c.Pools.Create(s.ctx, &apiv1.CreatePoolRequest{Pool: poolOf("db", 3, "1")}); err != nil {
		t.Fatal(err)
	}
	s.waitPool("db", 3, "db-0", "db-1", "db-2")
	if _, err := s.c.Pools.Scale(s.ctx, &apiv1.ScaleRequest{Key: s.key("db"), Replicas: 5}); err != nil {
		t.Fatal(err)
	}
	s.waitPool("db", 5, "db-0", "db-1", "db-2", "db-3", "db-4")
	if _, err := s.c.Pools.Scale(s.ctx, &apiv1.ScaleRequest{Key: s.key("db"), Replicas: 2}); err != nil {
		t.Fatal(err)
	}
	s.waitPool("db", 2, "db-0", "db-1")

	before := map[string]string{}
	for _, name := range []string{"db-0", "db-1"} {
		before[name] = s.vmi(name).GetMetadata().GetUid()
	}
	// Sample how many of the pool's VMs are not ready while it rolls.
	var (
		mu      sync.Mutex
		maxDown int
	)
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			list, err := s.c.VMs.List(s.ctx, &apiv1.ListVirtualMachinesRequest{Options: &apiv1.ListOptions{Namespace: "default", LabelSelector: "app=db"}})
			if err != nil {
				continue
			}
			down := 0
			for _, vm := range list.GetItems() {
				if !apiv1.IsConditionTrue(vm.GetStatus().GetConditions(), apiv1.ConditionReady) {
					down++
				}
			}
			mu.Lock()
			maxDown = max(maxDown, down)
			mu.Unlock()
		}
	}()
	p, err := s.c.Pools.Get(s.ctx, &apiv1.GetPoolRequest{Key: s.key("db")})
	if err != nil {
		t.Fatal(err)
	}
	p.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.Memory.Guest = "96Mi"
	if _, err := s.c.Pools.Update(s.ctx, &apiv1.UpdatePoolRequest{Pool: p}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyNoError(t, time.Minute, "the rollout to finish", func() error {
		p, err := s.c.Pools.Get(s.ctx, &apiv1.GetPoolRequest{Key: s.key("db")})
		if err != nil {
			return err
		}
		if st := p.GetStatus(); st.GetUpdatedReplicas() != 2 || st.GetReadyReplicas() != 2 || st.GetTemplateGeneration() != p.GetMetadata().GetGeneration() {
			return fmt.Errorf("status %v (generation %d)", st, p.GetMetadata().GetGeneration())
		}
		return nil
	})
	close(stop)
	<-sampled
	for name, uid := range before {
		v := s.vmi(name)
		if v.GetMetadata().GetUid() == uid || v.GetSpec().GetDomain().GetMemory().GetGuest() != "96Mi" {
			t.Errorf("%s after the rollout: instance %s with %s memory; want a new instance with 96Mi", name, v.GetMetadata().GetUid(), v.GetSpec().GetDomain().GetMemory().GetGuest())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if maxDown > 1 {
		t.Errorf("%d VMs were down at once during the rollout; max_unavailable is 1", maxDown)
	}
	if maxDown == 0 {
		t.Error("the sampler saw no VM down: the rollout restarted nothing")
	}
}
