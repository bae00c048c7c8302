package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

const (
	testSum      = "5da2a6f8e7b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5"
	testSumUpper = "5DA2A6F8E7B9C0D1E2F3A4B5C6D7E8F9A0B1C2D3E4F5A6B7C8D9E0F1A2B3C4D5"
)

func imageConfigModel(t *testing.T) imageModel {
	return imageModel{
		Name:   types.StringValue("debian-12.qcow2"),
		URL:    types.StringValue("https://images.example/debian-12.qcow2"),
		SHA256: types.StringValue(testSumUpper),
		Format: types.StringNull(),
		Nodes:  types.StringValue("all"),
		Labels: mustMap(t, map[string]string{"os": "debian"}),
		// As the configuration may spell it; the agent stores 20Gi.
		MaxSize: quantityOf("20480Mi"),
	}
}

// What the configuration says reaches the API as the agent stores it,
// and passes the agent's validation.
func TestImageFromModel(t *testing.T) {
	m := imageConfigModel(t)
	img, d := imageFromModel(context.Background(), &m)
	if d.HasError() {
		t.Fatal(d)
	}
	want := &apiv1.Image{
		Metadata: &apiv1.ObjectMeta{Name: "debian-12.qcow2", Labels: map[string]string{"os": "debian"}},
		Spec:     &apiv1.ImageSpec{Url: "https://images.example/debian-12.qcow2", Sha256: testSum, Nodes: "all", MaxSize: "20480Mi"},
	}
	if !proto.Equal(img, want) {
		t.Fatalf("imageFromModel:\n got %v\nwant %v", img, want)
	}
	if errs := validation.ValidateImage(img); len(errs) > 0 {
		t.Fatalf("the agent would refuse it: %v", errs)
	}
}

func storedImage() *apiv1.Image {
	return &apiv1.Image{
		Metadata: &apiv1.ObjectMeta{Name: "debian-12.qcow2", Uid: "uid-2", ResourceVersion: 7,
			Labels: map[string]string{"os": "debian"}, Annotations: map[string]string{"note": "kept"}},
		Spec: &apiv1.ImageSpec{Url: "https://images.example/debian-12.qcow2", Sha256: testSum, Nodes: "all", MaxSize: "20Gi"},
		Status: &apiv1.ImageStatus{Nodes: []*apiv1.ImageNodeStatus{
			{Node: "b", Phase: "Pulling", BytesDone: 10, BytesTotal: 100, Message: "downloading", ImageUid: "uid-2"},
			{Node: "a", Phase: "Ready", Sha256: testSum, Format: "qcow2", VirtualSizeBytes: 1 << 30, SizeBytes: 300 << 20,
				BytesDone: 300 << 20, BytesTotal: 300 << 20, ImageUid: "uid-2"},
			// About an earlier Image of the same name: not this one's.
			{Node: "c", Phase: "Ready", Sha256: testSum, ImageUid: "uid-1"},
		}},
	}
}

type nodeStatusRow struct {
	Node             types.String `tfsdk:"node"`
	Phase            types.String `tfsdk:"phase"`
	SHA256           types.String `tfsdk:"sha256"`
	Format           types.String `tfsdk:"format"`
	VirtualSizeBytes types.Int64  `tfsdk:"virtual_size_bytes"`
	SizeBytes        types.Int64  `tfsdk:"size_bytes"`
	BytesDone        types.Int64  `tfsdk:"bytes_done"`
	BytesTotal       types.Int64  `tfsdk:"bytes_total"`
	Message          types.String `tfsdk:"message"`
}

func TestImageToModel(t *testing.T) {
	prior := imageConfigModel(t)
	m, d := imageToModel(storedImage(), &prior, false)
	if d.HasError() {
		t.Fatal(d)
	}
	if m.ID.ValueString() != "debian-12.qcow2" || m.UID.ValueString() != "uid-2" || m.Nodes.ValueString() != "all" {
		t.Errorf("id %s uid %s nodes %s", m.ID, m.UID, m.Nodes)
	}
	// The configuration's spelling of the same checksum stays: no diff.
	if m.SHA256.ValueString() != testSumUpper {
		t.Errorf("sha256 = %s, want the prior spelling", m.SHA256)
	}
	if !m.Format.IsNull() {
		t.Errorf("format = %s, want null (unset)", m.Format)
	}
	// The agent's spelling, equal to the configuration's: no diff.
	if eq, _ := prior.MaxSize.StringSemanticEquals(context.Background(), m.MaxSize); m.MaxSize.ValueString() != "20Gi" || !eq {
		t.Errorf("max_size = %s, want 20Gi, equal to %s", m.MaxSize, prior.MaxSize)
	}
	var rows []nodeStatusRow
	if d := m.NodeStatus.ElementsAs(context.Background(), &rows, false); d.HasError() {
		t.Fatal(d)
	}
	if len(rows) != 2 || rows[0].Node.ValueString() != "a" || rows[1].Node.ValueString() != "b" {
		t.Fatalf("node_status = %+v, want a then b (c reported about another uid)", rows)
	}
	a, b := rows[0], rows[1]
	if a.Phase.ValueString() != "Ready" || a.SHA256.ValueString() != testSum || a.Format.ValueString() != "qcow2" ||
		a.VirtualSizeBytes.ValueInt64() != 1<<30 || a.SizeBytes.ValueInt64() != 300<<20 || !a.Message.IsNull() {
		t.Errorf("node a: %+v", a)
	}
	if b.Phase.ValueString() != "Pulling" || !b.SHA256.IsNull() || b.BytesDone.ValueInt64() != 10 || b.BytesTotal.ValueInt64() != 100 ||
		b.Message.ValueString() != "downloading" {
		t.Errorf("node b: %+v", b)
	}

	// Another checksum than the prior one is the agent's: drift shows.
	prior.SHA256 = types.StringValue(strings.Repeat("0", 64))
	if m, _ := imageToModel(storedImage(), &prior, false); m.SHA256.ValueString() != testSum {
		t.Errorf("sha256 = %s after a change outside Terraform", m.SHA256)
	}
	// Imports and data sources have no prior: the agent's lower case.
	if m, _ := imageToModel(storedImage(), nil, true); m.SHA256.ValueString() != testSum {
		t.Errorf("sha256 without prior = %s", m.SHA256)
	}
}

// Unset labels stay null, an empty map stays empty; data sources always
// get a map.
func TestImageToModelLabelsKeepTheirForm(t *testing.T) {
	img := storedImage()
	img.Metadata.Labels = nil
	prior := imageConfigModel(t)
	prior.Labels = types.MapNull(types.StringType)
	if m, _ := imageToModel(img, &prior, false); !m.Labels.IsNull() {
		t.Errorf("unset labels read back as %s", m.Labels)
	}
	prior.Labels = mustMap(t, map[string]string{})
	if m, _ := imageToModel(img, &prior, false); m.Labels.IsNull() || len(m.Labels.Elements()) != 0 {
		t.Errorf("empty labels read back as %s", m.Labels)
	}
	if m, _ := imageToModel(img, nil, true); m.Labels.IsNull() {
		t.Error("data source labels are null")
	}
	img.Status = nil
	if m, _ := imageToModel(img, nil, true); m.NodeStatus.IsNull() || len(m.NodeStatus.Elements()) != 0 {
		t.Errorf("no status gives node_status %s, want an empty list", m.NodeStatus)
	}
}

// Update changes labels, nodes and max_size only: annotations and the
// source stay.
func TestMergeImage(t *testing.T) {
	cur := storedImage()
	want := &apiv1.Image{
		Metadata: &apiv1.ObjectMeta{Name: "debian-12.qcow2", Labels: map[string]string{"tier": "base"}},
		Spec:     &apiv1.ImageSpec{Url: "https://elsewhere/x.qcow2", Nodes: "", MaxSize: "30Gi"},
	}
	next := mergeImage(cur, want)
	if next.Metadata.Annotations["note"] != "kept" || next.Spec.Url != cur.Spec.Url || next.Spec.Sha256 != testSum ||
		next.Metadata.ResourceVersion != 7 || len(next.Status.GetNodes()) != 3 {
		t.Errorf("merge lost what Terraform does not manage: %v", next)
	}
	if next.Spec.Nodes != "" || next.Metadata.Labels["tier"] != "base" || len(next.Metadata.Labels) != 1 || next.Spec.MaxSize != "30Gi" {
		t.Errorf("merge did not apply the plan: %v", next)
	}
	if cur.Spec.Nodes != "all" {
		t.Error("merge changed its input")
	}
	// Nothing to change is no update.
	same := mergeImage(cur, cur)
	if !proto.Equal(same, cur) {
		t.Error("merging the stored image onto itself changed it")
	}
}
