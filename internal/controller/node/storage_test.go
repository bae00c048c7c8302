package node

import (
	"context"
	"errors"
	"slices"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// fencer records Fence calls and fails while err is set.
type fencer struct {
	calls [][]string
	err   error
}

func (f *fencer) Fence(_ context.Context, _ *apiv1.Node, classes []string) error {
	f.calls = append(f.calls, classes)
	return f.err
}

// TestInstancesOnStorageClassesWaitForTheFence: at lease + margin, the
// instances whose volumes are on storage classes are failed only once
// their node is fenced from those classes; the others go at once.
func TestInstancesOnStorageClassesWaitForTheFence(t *testing.T) {
	re := apiv1.NodeFailurePolicyRestartElsewhere
	onClass := instance("db", "host-1", apiv1.PhaseRunning)
	onClass.Spec.Volumes = []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "1Gi", StorageClass: "ceph"}}}
	fc := &fencer{err: errors.New("ceph: no monitor reachable")}
	f := newFixtureFencing(t, fc,
		[]*apiv1.Node{readyNode("host-1", t0)},
		[]*apiv1.VirtualMachine{vm("db", re), vm("web", re)},
		onClass, instance("web", "host-1", apiv1.PhaseRunning),
	)
	f.at(0, "host-1")
	f.at(lease, "host-1")
	f.syncCaches()
	if after := f.at(lease+margin, "host-1"); after != f.c.opts.FenceRetry {
		t.Fatalf("fence failed: requeue after %v, want %v", after, f.c.opts.FenceRetry)
	}
	if got := f.failed(); !slices.Equal(got, []string{"default/web"}) {
		t.Fatalf("failed %v with the fence failing, want only the instance without class volumes", got)
	}
	if len(fc.calls) != 1 || !slices.Equal(fc.calls[0], []string{"ceph"}) {
		t.Fatalf("fence calls %v", fc.calls)
	}
	fc.err = nil
	f.syncCaches()
	if after := f.at(lease+margin+f.c.opts.FenceRetry, "host-1"); after != 0 {
		t.Fatalf("fence done: requeue after %v", after)
	}
	if got := f.failed(); !slices.Equal(got, []string{"default/web", "default/db"}) {
		t.Fatalf("failed %v after the fence", got)
	}
}
