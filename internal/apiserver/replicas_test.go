package apiserver

import (
	"context"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

func validRS(name string) *apiv1.VirtualMachineInstanceReplicaSet {
	tmpl := validVM(name).Spec.Template
	tmpl.Metadata = &apiv1.ObjectMeta{Labels: map[string]string{"app": name}}
	return &apiv1.VirtualMachineInstanceReplicaSet{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Spec: &apiv1.VirtualMachineInstanceReplicaSetSpec{
			Selector: &apiv1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: tmpl,
		},
	}
}

func validPool(name string) *apiv1.VirtualMachinePool {
	vm := validVM(name)
	return &apiv1.VirtualMachinePool{
		Metadata: &apiv1.ObjectMeta{Name: name, Labels: map[string]string{"team": "db"}},
		Spec: &apiv1.VirtualMachinePoolSpec{
			Replicas: proto.Int32(2),
			Selector: &apiv1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			VirtualMachineTemplate: &apiv1.VirtualMachineTemplateSpec{
				Metadata: &apiv1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:     vm.Spec,
			},
		},
	}
}

func (f *fixture) replicaSets() apiv1.ReplicaSetsClient { return apiv1.NewReplicaSetsClient(f.conn) }
func (f *fixture) pools() apiv1.PoolsClient             { return apiv1.NewPoolsClient(f.conn) }

// violations are the fields an InvalidArgument error names.
func violations(err error) map[string]bool {
	out := map[string]bool{}
	for _, v := range validation.FieldViolations(err) {
		out[v.GetField()] = true
	}
	return out
}

func TestReplicaSetCreateDefaultsAndOwnsServerFields(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	in := validRS("web")
	in.Metadata.Uid = "client-chosen"
	in.Metadata.Finalizers = []string{apiv1.FinalizerReplicaSet}
	in.Status = &apiv1.VirtualMachineInstanceReplicaSetStatus{Replicas: 9, ReadyReplicas: 9}
	out, err := f.replicaSets().Create(ctx, &apiv1.CreateReplicaSetRequest{ReplicaSet: in})
	if err != nil {
		t.Fatal(err)
	}
	m := out.Metadata
	if m.Namespace != "default" || m.Uid == "" || m.Uid == "client-chosen" || m.Generation != 1 || m.CreationTimestamp == nil || len(m.Finalizers) != 0 {
		t.Fatalf("metadata not server-owned: %v", m)
	}
	if out.Spec.GetReplicas() != 1 || out.Status.GetReplicas() != 0 || out.Status.GetLabelSelector() != "app=web" {
		t.Fatalf("spec %v, status %v", out.Spec, out.Status)
	}
	if out.Spec.Template.Spec.GracePeriodSeconds() != 30 || out.Spec.Template.Spec.Domain.Memory.Guest != "1Gi" {
		t.Fatalf("template not defaulted: %v", out.Spec.Template.Spec)
	}
	if _, err := f.replicaSets().Create(ctx, &apiv1.CreateReplicaSetRequest{ReplicaSet: validRS("web")}); code(err) != codes.AlreadyExists {
		t.Fatalf("duplicate create: %v", err)
	}

	bad := validRS("db")
	bad.Spec.Selector.MatchLabels["tier"] = "back"
	bad.Spec.Template.Spec.Domain.Devices.Interfaces = []*apiv1.Interface{{Name: "default", MacAddress: "02:00:00:00:00:01"}}
	bad.Spec.Template.Spec.Networks = []*apiv1.Network{{Name: "default", User: &apiv1.UserNetwork{}}}
	bad.Spec.Replicas = proto.Int32(validation.MaxReplicas + 1)
	_, err = f.replicaSets().Create(ctx, &apiv1.CreateReplicaSetRequest{ReplicaSet: bad})
	v := violations(err)
	if code(err) != codes.InvalidArgument || !v["spec.selector"] || !v["spec.replicas"] ||
		!v["spec.template.spec.domain.devices.interfaces[0].mac_address"] {
		t.Fatalf("invalid create: %v", err)
	}
}

func TestReplicaSetUpdateKeepsStatusAndSelector(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	rss := f.replicaSets()
	created, err := rss.Create(ctx, &apiv1.CreateReplicaSetRequest{ReplicaSet: validRS("web")})
	if err != nil {
		t.Fatal(err)
	}
	// The controller's status survives users' updates.
	if _, err := f.st.ReplicaSets.GuaranteedUpdate(ctx, "default", "web", func(rs *apiv1.VirtualMachineInstanceReplicaSet) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
		rs.Status.Replicas, rs.Status.ReadyReplicas = 1, 1
		return rs, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := rss.Update(ctx, &apiv1.UpdateReplicaSetRequest{ReplicaSet: created}); code(err) != codes.Aborted {
		t.Fatalf("stale update: %v", err)
	}
	cur, err := rss.Get(ctx, &apiv1.GetReplicaSetRequest{Key: &apiv1.ObjectKey{Name: "web"}})
	if err != nil {
		t.Fatal(err)
	}
	upd := proto.Clone(cur).(*apiv1.VirtualMachineInstanceReplicaSet)
	upd.Metadata.ResourceVersion = 0
	if _, err := rss.Update(ctx, &apiv1.UpdateReplicaSetRequest{ReplicaSet: upd}); code(err) != codes.InvalidArgument {
		t.Fatalf("versionless update: %v", err)
	}

	upd = proto.Clone(cur).(*apiv1.VirtualMachineInstanceReplicaSet)
	upd.Metadata.Labels = map[string]string{"tier": "front"}
	upd.Status = &apiv1.VirtualMachineInstanceReplicaSetStatus{Replicas: 99}
	out, err := rss.Update(ctx, &apiv1.UpdateReplicaSetRequest{ReplicaSet: upd})
	if err != nil || out.Metadata.Generation != 1 || out.Status.GetReplicas() != 1 || out.Metadata.Labels["tier"] != "front" {
		t.Fatalf("label update: %v %v", err, out)
	}
	upd = proto.Clone(out).(*apiv1.VirtualMachineInstanceReplicaSet)
	upd.Spec.Paused = true
	upd.Spec.Template.Metadata.Labels["version"] = "2"
	out2, err := rss.Update(ctx, &apiv1.UpdateReplicaSetRequest{ReplicaSet: upd})
	if err != nil || out2.Metadata.Generation != 2 || !out2.Spec.Paused || out2.Status.GetReplicas() != 1 {
		t.Fatalf("spec update: %v %v", err, out2)
	}
	if again, err := rss.Update(ctx, &apiv1.UpdateReplicaSetRequest{ReplicaSet: out2}); err != nil || again.Metadata.ResourceVersion != out2.Metadata.ResourceVersion {
		t.Fatalf("no-op update wrote: %v %v", err, again.GetMetadata())
	}

	upd = proto.Clone(out2).(*apiv1.VirtualMachineInstanceReplicaSet)
	upd.Spec.Selector.MatchLabels["version"] = "2"
	_, err = rss.Update(ctx, &apiv1.UpdateReplicaSetRequest{ReplicaSet: upd})
	if code(err) != codes.InvalidArgument || !violations(err)["spec.selector"] {
		t.Fatalf("selector change: %v", err)
	}
}

// Scale changes spec.replicas alone, with compare-and-swap retries, for
// both kinds.
func TestScale(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if _, err := f.replicaSets().Create(ctx, &apiv1.CreateReplicaSetRequest{ReplicaSet: validRS("web")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pools().Create(ctx, &apiv1.CreatePoolRequest{Pool: validPool("db")}); err != nil {
		t.Fatal(err)
	}
	type scaled interface {
		GetMetadata() *apiv1.ObjectMeta
	}
	kinds := []struct {
		name     string
		scale    func(*apiv1.ScaleRequest) (scaled, int32, error)
		setReady func() error
	}{
		{"web", func(r *apiv1.ScaleRequest) (scaled, int32, error) {
			out, err := f.replicaSets().Scale(ctx, r)
			return out, out.GetSpec().GetReplicas(), err
		}, func() error {
			_, err := f.st.ReplicaSets.GuaranteedUpdate(ctx, "default", "web", func(rs *apiv1.VirtualMachineInstanceReplicaSet) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
				rs.Status.ReadyReplicas++
				return rs, nil
			})
			return err
		}},
		{"db", func(r *apiv1.ScaleRequest) (scaled, int32, error) {
			out, err := f.pools().Scale(ctx, r)
			return out, out.GetSpec().GetReplicas(), err
		}, func() error {
			_, err := f.st.Pools.GuaranteedUpdate(ctx, "default", "db", func(p *apiv1.VirtualMachinePool) (*apiv1.VirtualMachinePool, error) {
				p.Status.ReadyReplicas++
				return p, nil
			})
			return err
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			key := &apiv1.ObjectKey{Name: k.name}
			out, n, err := k.scale(&apiv1.ScaleRequest{Key: key, Replicas: 5})
			if err != nil || n != 5 || out.GetMetadata().GetGeneration() != 2 {
				t.Fatalf("scale to 5: %v, %d replicas, %v", err, n, out.GetMetadata())
			}
			again, _, err := k.scale(&apiv1.ScaleRequest{Key: key, Replicas: 5})
			if err != nil || again.GetMetadata().GetResourceVersion() != out.GetMetadata().GetResourceVersion() {
				t.Fatalf("scale to the same count wrote: %v %v", err, again.GetMetadata())
			}
			for _, bad := range []int32{-1, validation.MaxReplicas + 1} {
				_, _, err := k.scale(&apiv1.ScaleRequest{Key: key, Replicas: bad})
				if code(err) != codes.InvalidArgument || !violations(err)["replicas"] {
					t.Errorf("scale to %d: %v", bad, err)
				}
			}
			if _, _, err := k.scale(&apiv1.ScaleRequest{Key: &apiv1.ObjectKey{Name: "missing"}, Replicas: 1}); code(err) != codes.NotFound {
				t.Errorf("scale of a missing object: %v", err)
			}
			// Scales race with the controller's status writes: every call
			// lands, none loses another's write.
			var wg sync.WaitGroup
			errs := make(chan error, 20)
			for i := range 10 {
				wg.Go(func() {
					_, _, err := k.scale(&apiv1.ScaleRequest{Key: key, Replicas: int32(i)})
					errs <- err
				})
				wg.Go(func() { errs <- k.setReady() })
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			final, n, err := k.scale(&apiv1.ScaleRequest{Key: key, Replicas: 0})
			if err != nil || n != 0 {
				t.Fatalf("scale to 0: %v %d", err, n)
			}
			var ready int32
			switch o := final.(type) {
			case *apiv1.VirtualMachineInstanceReplicaSet:
				ready = o.Status.ReadyReplicas
			case *apiv1.VirtualMachinePool:
				ready = o.Status.ReadyReplicas
			}
			if ready != 10 {
				t.Errorf("status writes lost: ready_replicas %d, want 10", ready)
			}
		})
	}
}

func TestPoolCreateUpdateDelete(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	pools := f.pools()
	out, err := pools.Create(ctx, &apiv1.CreatePoolRequest{Pool: validPool("db")})
	if err != nil {
		t.Fatal(err)
	}
	s := out.Spec
	if s.MaxUnavailable != "100%" || s.ScaleInOrder != apiv1.ScaleInDescendingOrder || s.GetReplicas() != 2 ||
		s.VirtualMachineTemplate.Spec.NodeFailurePolicy != apiv1.DefaultNodeFailurePolicy || out.Status.GetLabelSelector() != "app=db" {
		t.Fatalf("defaults: %v %v", s, out.Status)
	}
	// No MAC is assigned to the template, as it is to a VM's: each VM
	// gets its own.
	if mac := s.VirtualMachineTemplate.Spec.Template.Spec.Domain.Devices.GetInterfaces(); len(mac) > 0 && mac[0].MacAddress != "" {
		t.Fatalf("template got MAC %s", mac[0].MacAddress)
	}

	upd := proto.Clone(out).(*apiv1.VirtualMachinePool)
	upd.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.Memory.Guest = "2048Mi"
	upd.Spec.MaxUnavailable = "1"
	out2, err := pools.Update(ctx, &apiv1.UpdatePoolRequest{Pool: upd})
	if err != nil || out2.Metadata.Generation != 2 || out2.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.Memory.Guest != "2Gi" {
		t.Fatalf("template update: %v %v", err, out2)
	}
	upd = proto.Clone(out2).(*apiv1.VirtualMachinePool)
	upd.Spec.MaxUnavailable = "0"
	upd.Spec.ScaleInOrder = "Random"
	upd.Spec.Selector = &apiv1.LabelSelector{MatchLabels: map[string]string{"app": "db", "x": "y"}}
	upd.Spec.VirtualMachineTemplate.Metadata.Labels["x"] = "y"
	_, err = pools.Update(ctx, &apiv1.UpdatePoolRequest{Pool: upd})
	if v := violations(err); !v["spec.max_unavailable"] || !v["spec.scale_in_order"] || !v["spec.selector"] {
		t.Fatalf("invalid update: %v", err)
	}

	list, err := pools.List(ctx, &apiv1.ListPoolsRequest{Options: &apiv1.ListOptions{LabelSelector: "team=db"}})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list: %v %v", err, list)
	}
	if list, err := pools.List(ctx, &apiv1.ListPoolsRequest{Options: &apiv1.ListOptions{LabelSelector: "team=web"}}); err != nil || len(list.Items) != 0 {
		t.Fatalf("list by another label: %v %v", err, list)
	}

	// Without finalizers the pool goes at once.
	key := &apiv1.ObjectKey{Name: "db"}
	if _, err := pools.Delete(ctx, &apiv1.DeletePoolRequest{Key: key}); err != nil {
		t.Fatal(err)
	}
	if _, err := pools.Get(ctx, &apiv1.GetPoolRequest{Key: key}); code(err) != codes.NotFound {
		t.Fatalf("deleted pool: %v", err)
	}
}

func TestReplicaSetDeleteHonoursFinalizers(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	rss := f.replicaSets()
	created, err := rss.Create(ctx, &apiv1.CreateReplicaSetRequest{ReplicaSet: validRS("web")})
	if err != nil {
		t.Fatal(err)
	}
	// The controller put its finalizer on it.
	if _, err := f.st.ReplicaSets.GuaranteedUpdate(ctx, "default", "web", func(rs *apiv1.VirtualMachineInstanceReplicaSet) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
		rs.Metadata.Finalizers = []string{apiv1.FinalizerReplicaSet}
		return rs, nil
	}); err != nil {
		t.Fatal(err)
	}
	key := &apiv1.ObjectKey{Name: "web"}
	if _, err := rss.Delete(ctx, &apiv1.DeleteReplicaSetRequest{Key: key, Options: &apiv1.DeleteOptions{Uid: "wrong"}}); code(err) != codes.InvalidArgument {
		t.Fatalf("delete with a malformed uid: %v", err)
	}
	other := "6f1c2a3e-0000-4000-8000-000000000009"
	if _, err := rss.Delete(ctx, &apiv1.DeleteReplicaSetRequest{Key: key, Options: &apiv1.DeleteOptions{Uid: other}}); code(err) == codes.OK {
		t.Fatal("delete with another uid succeeded")
	}
	out, err := rss.Delete(ctx, &apiv1.DeleteReplicaSetRequest{Key: key, Options: &apiv1.DeleteOptions{Uid: created.Metadata.Uid}})
	if err != nil || out.Metadata.DeletionTimestamp == nil {
		t.Fatalf("delete with finalizer: %v %v", err, out.GetMetadata())
	}
	if _, err := rss.Get(ctx, &apiv1.GetReplicaSetRequest{Key: key}); err != nil {
		t.Fatalf("replica set gone before its finalizer: %v", err)
	}
	if _, err := f.st.ReplicaSets.GuaranteedUpdate(ctx, "default", "web", func(rs *apiv1.VirtualMachineInstanceReplicaSet) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
		rs.Metadata.Finalizers = nil
		return rs, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := rss.Get(ctx, &apiv1.GetReplicaSetRequest{Key: key}); code(err) != codes.NotFound {
		t.Fatalf("after the last finalizer: %v", err)
	}
}

func TestReplicaSetWatch(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := f.replicaSets().Create(ctx, &apiv1.CreateReplicaSetRequest{ReplicaSet: validRS("web")}); err != nil {
		t.Fatal(err)
	}
	w, err := f.replicaSets().Watch(ctx, &apiv1.WatchReplicaSetsRequest{Options: &apiv1.WatchOptions{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []apiv1.EventType{apiv1.EventType_ADDED, apiv1.EventType_SYNCED} {
		ev, err := w.Recv()
		if err != nil || ev.Type != want {
			t.Fatalf("want %v, got %v %v", want, ev, err)
		}
	}
	if _, err := f.replicaSets().Scale(ctx, &apiv1.ScaleRequest{Key: &apiv1.ObjectKey{Name: "web"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	ev, err := w.Recv()
	if err != nil || ev.Type != apiv1.EventType_MODIFIED || ev.Object.Spec.GetReplicas() != 3 {
		t.Fatalf("after scale: %v %v", ev, err)
	}
}
