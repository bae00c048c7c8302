package e2e

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// TestStorageClassBadInput: what goes wrong with a class is said where it
// is wrong, and leaves nothing in the pool. A VM on a class that does not
// exist is refused naming the field; one on a class no node is selected
// by, or on a class whose monitor does not answer, whose key is wrong or
// whose pool does not exist, waits Unschedulable saying why, the class's
// Ready condition naming the cause, and no image is made.
func TestStorageClassBadInput(t *testing.T) {
	t.Parallel()
	c := newMultiNodeCluster(t, mnOptions{ceph: true})
	t.Cleanup(c.dumpOnFailure)
	cl, _ := sharedCeph.Get(t)
	vmOn := func(name, class string) *apiv1.VirtualMachine {
		disks := []*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}}
		vols := []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "16Mi", StorageClass: class}}}
		return withDisks(guestVM(c.ns, name, apiv1.RunStrategyAlways, c.nodes[0].Kernel, ""), disks, vols)
	}

	_, err := c.api.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: vmOn("nowhere", "missing")})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "spec.template.spec.volumes[0].persistent.storage_class") {
		t.Fatalf("VM on a class that does not exist: %v", err)
	}

	good := c.rbdClass("ceph")
	out, err := cl.Admin(c.ctx, "ceph", "auth", "get-key", "client."+good.GetSpec().GetRbd().GetUser())
	if err != nil {
		t.Fatal(err)
	}
	key := strings.TrimSpace(string(out))
	bad := func(name string, mut func(*apiv1.RBDStorage), selector map[string]string) {
		r := &apiv1.RBDStorage{Monitors: cl.Monitors(), Pool: c.cephPool(), User: good.GetSpec().GetRbd().GetUser(), Key: key}
		mut(r)
		if _, err := c.api.StorageClasses.Create(c.ctx, &apiv1.CreateStorageClassRequest{StorageClass: &apiv1.StorageClass{
			Metadata: &apiv1.ObjectMeta{Name: name}, Spec: &apiv1.StorageClassSpec{Rbd: r, NodeSelector: selector}}}); err != nil {
			t.Fatal(err)
		}
	}
	hub := strings.Split(cl.Monitors()[0], ":")[0]
	bad("nobody", func(*apiv1.RBDStorage) {}, map[string]string{"storage.example.com/none": "yes"})
	bad("silent", func(r *apiv1.RBDStorage) { r.Monitors = []string{hub + ":3999"} }, nil)
	bad("wrongkey", func(r *apiv1.RBDStorage) { r.Key = "AQCauhZroSmaLxAADcjclatTLvDt1b2rQ3bj4Q==" }, nil)
	bad("nopool", func(r *apiv1.RBDStorage) { r.Pool = "nopool" }, nil)

	for _, tc := range []struct{ class, ready, unschedulable string }{
		{"nobody", "", "didn't match the node selector of storage class nobody"},
		{"silent", "no monitor answered (spec.rbd.monitors)", "could not reach storage class silent"},
		{"wrongkey", "refused the user or key (spec.rbd.user, spec.rbd.key)", "could not reach storage class wrongkey"},
		{"nopool", "the pool does not exist (spec.rbd.pool)", "could not reach storage class nopool"},
	} {
		if tc.ready != "" {
			testutil.EventuallyNoError(t, stateTimeout, "class "+tc.class+" not ready with the cause", func() error {
				sc, err := c.api.StorageClasses.Get(c.ctx, &apiv1.GetStorageClassRequest{Name: tc.class})
				if err != nil {
					return err
				}
				r := apiv1.FindCondition(sc.GetStatus().GetConditions(), apiv1.ConditionReady)
				if r.GetStatus() != apiv1.ConditionFalse || !strings.Contains(r.GetMessage(), tc.ready) {
					return status.Errorf(codes.Unknown, "Ready %v", r)
				}
				return nil
			})
		}
		name := "on-" + tc.class
		if _, err := c.api.VMs.Create(c.ctx, &apiv1.CreateVirtualMachineRequest{Vm: vmOn(name, tc.class)}); err != nil {
			t.Fatal(err)
		}
		testutil.EventuallyNoError(t, stateTimeout, name+" unschedulable with the class named", func() error {
			v := c.vmi(name)
			ps := apiv1.FindCondition(v.GetStatus().GetConditions(), apiv1.ConditionPodScheduled)
			if ps.GetStatus() != apiv1.ConditionFalse || !strings.Contains(ps.GetMessage(), tc.unschedulable) {
				return status.Errorf(codes.Unknown, "PodScheduled %v", ps)
			}
			return nil
		})
		if out, err := cl.Admin(c.ctx, "rbd", "ls", c.cephPool()); err != nil || strings.Contains(string(out), rbdImageOf(c.vm(name), "data")) {
			t.Fatalf("pool after %s: %s %v", name, out, err)
		}
	}
}
