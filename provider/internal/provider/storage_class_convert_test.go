package provider

import (
	"context"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func rbdClassModel(t *testing.T, key types.String) storageClassModel {
	var diags diag.Diagnostics
	return storageClassModel{
		Name: types.StringValue("ceph"),
		RBD: &rbdModel{Monitors: stringList([]string{"10.0.0.1:3300", "10.0.0.2:3300"}, &diags),
			Pool: types.StringValue("vms"), User: types.StringValue("virtplane"), Key: key},
		NodeSelector: mustMap(t, map[string]string{"example.com/ceph": "true"}),
	}
}

// The key goes to the agent without the spaces a file gives it; reads,
// which never carry it, keep the prior's (the plan's or the state's), and
// an import has none. Ready and message come from the Ready condition.
func TestStorageClassRoundTrip(t *testing.T) {
	ctx := context.Background()
	plan := rbdClassModel(t, types.StringValue(testCephKey+"\n"))
	sc, d := storageClassFromModel(ctx, &plan)
	if d.HasError() {
		t.Fatal(d)
	}
	want := &apiv1.StorageClass{
		Metadata: &apiv1.ObjectMeta{Name: "ceph"},
		Spec: &apiv1.StorageClassSpec{
			Rbd:          &apiv1.RBDStorage{Monitors: []string{"10.0.0.1:3300", "10.0.0.2:3300"}, Pool: "vms", User: "virtplane", Key: testCephKey},
			NodeSelector: map[string]string{"example.com/ceph": "true"},
		},
	}
	if !proto.Equal(sc, want) {
		t.Fatalf("fromModel: %v\nwant %v", sc, want)
	}
	// As the agent answers: no key, key_set, a condition.
	read := proto.Clone(sc).(*apiv1.StorageClass)
	read.Spec.Rbd.Key = ""
	read.Metadata.Uid = "u1"
	read.Status = &apiv1.StorageClassStatus{KeySet: true, Conditions: []*apiv1.Condition{
		{Type: "Ready", Status: "False", Message: "pool vms does not exist"}}}
	m, d := storageClassToModel(read, &plan)
	if d.HasError() {
		t.Fatal(d)
	}
	if !m.RBD.Key.Equal(plan.RBD.Key) || !m.KeySet.ValueBool() || m.Ready.ValueBool() ||
		m.Message.ValueString() != "pool vms does not exist" || m.UID.ValueString() != "u1" || m.ID.ValueString() != "ceph" ||
		!m.RBD.Monitors.Equal(plan.RBD.Monitors) || !m.NodeSelector.Equal(plan.NodeSelector) || m.SharedFilesystem != nil {
		t.Errorf("toModel: %+v %+v", m, m.RBD)
	}
	read.Status.Conditions[0].Status, read.Status.Conditions[0].Message = "True", ""
	if m, _ := storageClassToModel(read, nil); !m.RBD.Key.IsNull() || !m.Ready.ValueBool() || !m.Message.IsNull() {
		t.Errorf("imported: key %v ready %v message %v", m.RBD.Key, m.Ready, m.Message)
	}
	// No condition yet: not ready, nothing said.
	read.Status.Conditions = nil
	if m, _ := storageClassToModel(read, nil); m.Ready.ValueBool() || !m.Message.IsNull() {
		t.Errorf("no condition: ready %v message %v", m.Ready, m.Message)
	}
	var diags diag.Diagnostics
	data := storageClassDataFromModel(m, &diags)
	if data.RBD == nil || data.RBD.Pool.ValueString() != "vms" || data.NodeSelector.IsNull() {
		t.Errorf("data source model: %+v", data)
	}

	shared := storageClassModel{Name: types.StringValue("nfs"), NodeSelector: types.MapNull(types.StringType),
		SharedFilesystem: &sharedFilesystemModel{Path: types.StringValue("/mnt/vms")}}
	sc, _ = storageClassFromModel(ctx, &shared)
	if sc.GetSpec().GetRbd() != nil || sc.GetSpec().GetSharedFilesystem().GetPath() != "/mnt/vms" || sc.GetSpec().GetNodeSelector() != nil {
		t.Errorf("shared: %v", sc)
	}
}

// An update replaces the spec and keeps what Terraform does not manage.
func TestMergeStorageClass(t *testing.T) {
	cur := &apiv1.StorageClass{
		Metadata: &apiv1.ObjectMeta{Name: "ceph", Uid: "u1", ResourceVersion: 7, Labels: map[string]string{"by": "hand"},
			Annotations: map[string]string{"a": "b"}},
		Spec:   &apiv1.StorageClassSpec{Rbd: &apiv1.RBDStorage{Monitors: []string{"10.0.0.1:3300"}, Pool: "vms", User: "virtplane"}},
		Status: &apiv1.StorageClassStatus{KeySet: true},
	}
	want := &apiv1.StorageClass{Metadata: &apiv1.ObjectMeta{Name: "ceph"}, Spec: &apiv1.StorageClassSpec{
		Rbd: &apiv1.RBDStorage{Monitors: []string{"10.0.0.2:3300"}, Pool: "vms", User: "virtplane"}, NodeSelector: map[string]string{"x": "y"}}}
	next := mergeStorageClass(cur, want)
	if !proto.Equal(next.Spec, want.Spec) || next.Metadata.Labels["by"] != "hand" || next.Metadata.Annotations["a"] != "b" ||
		next.Metadata.ResourceVersion != 7 || !proto.Equal(next.Status, cur.Status) {
		t.Errorf("merge: %v", next)
	}
	// The same spec (no key: unchanged) writes nothing.
	if !proto.Equal(mergeStorageClass(cur, &apiv1.StorageClass{Spec: cur.Spec}), cur) {
		t.Error("merging the stored spec changes the class")
	}
}
