package apiserver

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func validImage(name string) *apiv1.Image {
	return &apiv1.Image{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Spec:     &apiv1.ImageSpec{Url: "http://127.0.0.1:8080/" + name, Sha256: strings.Repeat("AB", 32)},
	}
}

func TestImageCreateValidatesAndOwnsStatus(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	images := apiv1.NewImagesClient(f.conn)

	in := validImage("debian-12.qcow2")
	in.Status = &apiv1.ImageStatus{Nodes: []*apiv1.ImageNodeStatus{{Node: "n1", Phase: "Ready"}}}
	out, err := images.Create(ctx, &apiv1.CreateImageRequest{Image: in})
	if err != nil {
		t.Fatal(err)
	}
	if out.Spec.Sha256 != strings.Repeat("ab", 32) {
		t.Errorf("sha256 not normalized to lower case: %s", out.Spec.Sha256)
	}
	if len(out.GetStatus().GetNodes()) != 0 || out.Metadata.Uid == "" {
		t.Errorf("client set status or no uid: %v", out)
	}

	for _, tc := range []struct {
		mutate func(*apiv1.Image)
		field  string
	}{
		{func(i *apiv1.Image) { i.Spec.Url = "ftp://host/x" }, "spec.url.scheme"},
		{func(i *apiv1.Image) { i.Spec.Url = "" }, "spec.url"},
		{func(i *apiv1.Image) { i.Spec.Url = "https://user:secret@host/x" }, "spec.url"},
		{func(i *apiv1.Image) { i.Spec.Url = "file://relative/x" }, "spec.url"},
		{func(i *apiv1.Image) { i.Spec.Url = "file:///a/../b" }, "spec.url"},
		{func(i *apiv1.Image) { i.Spec.Sha256 = "abc" }, "spec.sha256"},
		{func(i *apiv1.Image) { i.Spec.Format = "vmdk" }, "spec.format"},
		{func(i *apiv1.Image) { i.Spec.Format = "raw" }, "spec.format"}, // name says .qcow2
		{func(i *apiv1.Image) { i.Spec.Nodes = "some" }, "spec.nodes"},
		{func(i *apiv1.Image) { i.Metadata.Name = "Upper" }, "metadata.name"},
		{func(i *apiv1.Image) { i.Metadata.Namespace = "default" }, "metadata.namespace"},
	} {
		bad := validImage("other.qcow2")
		tc.mutate(bad)
		_, err := images.Create(ctx, &apiv1.CreateImageRequest{Image: bad})
		if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: got %v, want InvalidArgument naming %s", tc.field, err, tc.field)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("error shows the URL's password: %v", err)
		}
	}
}

func TestImageSourceIsImmutable(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	images := apiv1.NewImagesClient(f.conn)
	out, err := images.Create(ctx, &apiv1.CreateImageRequest{Image: validImage("img")})
	if err != nil {
		t.Fatal(err)
	}
	changed := validImage("img")
	changed.Metadata.ResourceVersion = out.Metadata.ResourceVersion
	changed.Spec.Url = "http://127.0.0.1:8080/other"
	if _, err := images.Update(ctx, &apiv1.UpdateImageRequest{Image: changed}); code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "spec.url") {
		t.Fatalf("url change: %v", err)
	}
	eager := validImage("img")
	eager.Metadata.ResourceVersion = out.Metadata.ResourceVersion
	eager.Spec.Nodes = "all"
	got, err := images.Update(ctx, &apiv1.UpdateImageRequest{Image: eager})
	if err != nil || got.Spec.Nodes != "all" || got.Metadata.Generation != 2 {
		t.Fatalf("nodes change: %v %v", got, err)
	}
}

func TestImageDeleteRefusedWhileInUse(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	images := apiv1.NewImagesClient(f.conn)
	if _, err := images.Create(ctx, &apiv1.CreateImageRequest{Image: validImage("debian.qcow2")}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM("web")}); err != nil {
		t.Fatal(err)
	}
	_, err := images.Delete(ctx, &apiv1.DeleteImageRequest{Name: "debian.qcow2"})
	if code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "vm default/web") {
		t.Fatalf("delete in use: %v", err)
	}
	if _, err := f.vms.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: &apiv1.ObjectKey{Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := images.Delete(ctx, &apiv1.DeleteImageRequest{Name: "debian.qcow2"}); err != nil {
		t.Fatalf("delete unused: %v", err)
	}
}

func TestImageNodeStatusEntries(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	svc := &imageService{s: f.srv}
	img, err := svc.Create(ctx, &apiv1.CreateImageRequest{Image: validImage("img")})
	if err != nil {
		t.Fatal(err)
	}
	report := func(node, as string, st *apiv1.ImageNodeStatus) (*apiv1.Image, error) {
		st.Node = node
		return svc.UpdateNodeStatus(WithIdentity(ctx, Identity{Kind: Node, Node: as}), &apiv1.UpdateImageNodeStatusRequest{Name: "img", Status: st})
	}
	for _, n := range []string{"n3", "n1", "n2"} {
		if _, err := report(n, n, &apiv1.ImageNodeStatus{Phase: "Pulling", BytesDone: 10}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := report("n1", "n1", &apiv1.ImageNodeStatus{Phase: "Ready", BytesDone: 20, BytesTotal: 20})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range out.Status.Nodes {
		got = append(got, e.Node+"="+e.Phase)
		if e.ImageUid != img.Metadata.Uid || e.LastUpdateTime == nil {
			t.Errorf("entry %s: uid %q time %v", e.Node, e.ImageUid, e.LastUpdateTime)
		}
	}
	if strings.Join(got, ",") != "n1=Ready,n2=Pulling,n3=Pulling" {
		t.Fatalf("entries = %v", got)
	}
	if _, err := report("n2", "n1", &apiv1.ImageNodeStatus{Phase: "Failed"}); code(err) != codes.PermissionDenied {
		t.Fatalf("node reporting for another: %v", err)
	}
	if _, err := report("n1", "n1", &apiv1.ImageNodeStatus{Phase: "Done"}); code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "status.phase") {
		t.Fatalf("bad phase: %v", err)
	}
	stale := &apiv1.ImageNodeStatus{Phase: "Ready", ImageUid: "6f1d3c4e-8a6b-4d2a-9a53-0c1b2d3e4f50"}
	if _, err := report("n1", "n1", stale); code(err) != codes.FailedPrecondition {
		t.Fatalf("report about a re-created image: %v", err)
	}
}

func TestNodeDeleteForgetsItsPulls(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	svc := &imageService{s: f.srv}
	if _, err := svc.Create(ctx, &apiv1.CreateImageRequest{Image: validImage("img")}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"n1", "n2"} {
		if _, err := f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: n}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.UpdateNodeStatus(ctx, &apiv1.UpdateImageNodeStatusRequest{Name: "img", Status: &apiv1.ImageNodeStatus{Node: n, Phase: "Ready"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.nodes.Delete(ctx, &apiv1.DeleteNodeRequest{Name: "n1"}); err != nil {
		t.Fatal(err)
	}
	img, err := svc.Get(ctx, &apiv1.GetImageRequest{Name: "img"})
	if err != nil {
		t.Fatal(err)
	}
	if got := img.GetStatus().GetNodes(); len(got) != 1 || got[0].GetNode() != "n2" {
		t.Fatalf("entries after deleting n1: %v", got)
	}
}
