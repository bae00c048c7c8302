package apiserver

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// TestImageMaxSizeDefaultAndCap: an Image without max_size gets the
// server's default, one above the cap is refused naming the field, a
// quantity is stored canonical, an update that leaves it unset keeps it,
// one that raises it within the cap takes it, and an Image whose value
// the cap was lowered under may still change its labels.
func TestImageMaxSizeDefaultAndCap(t *testing.T) {
	f := newFixtureWith(t, Options{ImagePolicy: imagepolicy.Policy{DefaultMaxSize: 8 << 30, MaxSizeCap: 64 << 30}})
	ctx := context.Background()
	images := apiv1.NewImagesClient(f.conn)

	out, err := images.Create(ctx, &apiv1.CreateImageRequest{Image: validImage("a.qcow2")})
	if err != nil || out.Spec.MaxSize != "8Gi" {
		t.Fatalf("default: %v, %v; want max_size 8Gi", out.GetSpec(), err)
	}
	over := validImage("b.qcow2")
	over.Spec.MaxSize = "65Gi"
	if _, err := images.Create(ctx, &apiv1.CreateImageRequest{Image: over}); code(err) != codes.InvalidArgument ||
		!strings.Contains(err.Error(), "spec.max_size") || !strings.Contains(err.Error(), "at most 64Gi") {
		t.Fatalf("above the cap: %v", err)
	}
	for _, bad := range []string{"0", "-1Gi", "1.5", "lots"} {
		over.Spec.MaxSize = bad
		if _, err := images.Create(ctx, &apiv1.CreateImageRequest{Image: over}); code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "spec.max_size") {
			t.Errorf("max_size %q: %v", bad, err)
		}
	}
	over.Spec.MaxSize = "16384Mi"
	b, err := images.Create(ctx, &apiv1.CreateImageRequest{Image: over})
	if err != nil || b.Spec.MaxSize != "16Gi" {
		t.Fatalf("16384Mi: %v, %v; want 16Gi", b.GetSpec(), err)
	}

	// Unset on update keeps it; a new value within the cap is taken.
	up := proto.Clone(b).(*apiv1.Image)
	up.Spec.MaxSize = ""
	up.Metadata.Labels = map[string]string{"a": "b"}
	if b, err = images.Update(ctx, &apiv1.UpdateImageRequest{Image: up}); err != nil || b.Spec.MaxSize != "16Gi" {
		t.Fatalf("update without max_size: %v, %v", b.GetSpec(), err)
	}
	up = proto.Clone(b).(*apiv1.Image)
	up.Spec.MaxSize = "32Gi"
	if b, err = images.Update(ctx, &apiv1.UpdateImageRequest{Image: up}); err != nil || b.Spec.MaxSize != "32Gi" {
		t.Fatalf("raising max_size: %v, %v", b.GetSpec(), err)
	}
	// The cap lowered since (a server started again over the same store
	// with a lower --image-max-size-cap): the value stays, labels may
	// change, a new value above the cap may not.
	lowered := New(f.st, Options{ImagePolicy: imagepolicy.Policy{DefaultMaxSize: 8 << 30, MaxSizeCap: 16 << 30}})
	images = apiv1.NewImagesClient(testutil.ServeGRPC(t, lowered.Register))
	up = proto.Clone(b).(*apiv1.Image)
	up.Metadata.Labels = map[string]string{"a": "c"}
	if b, err = images.Update(ctx, &apiv1.UpdateImageRequest{Image: up}); err != nil {
		t.Fatalf("label change under a lowered cap: %v", err)
	}
	up = proto.Clone(b).(*apiv1.Image)
	up.Spec.MaxSize = "20Gi"
	if _, err := images.Update(ctx, &apiv1.UpdateImageRequest{Image: up}); code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "spec.max_size") {
		t.Fatalf("a new value above the lowered cap: %v", err)
	}
}

// TestHeartbeatCarriesImagePolicy: every heartbeat's answer carries the
// server's image policy, as the node takes it.
func TestHeartbeatCarriesImagePolicy(t *testing.T) {
	f := newFixtureWith(t, Options{ImagePolicy: imagepolicy.Policy{
		SourceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16")}, MaxVirtualSize: 1 << 40}})
	ctx := context.Background()
	if _, err := f.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: nodeWithImages("n1")}); err != nil {
		t.Fatal(err)
	}
	resp, err := f.nodes.Heartbeat(ctx, &apiv1.HeartbeatRequest{Name: "n1", Schedulable: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := imagepolicy.FromProto(resp.GetImagePullPolicy())
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got.Proto(), f.srv.opts.ImagePolicy.Proto()) || got.SourceCIDRs[0].String() != "10.20.0.0/16" || got.MaxVirtualSize != 1<<40 {
		t.Fatalf("heartbeat carried %v, want %v", resp.GetImagePullPolicy(), f.srv.opts.ImagePolicy.Proto())
	}
}
