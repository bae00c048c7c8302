package provider

import (
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// The agent's validation errors land on the attributes that caused them.
func TestImageErrorsLandOnAttributes(t *testing.T) {
	img := &apiv1.Image{
		Metadata: &apiv1.ObjectMeta{Name: "debian.qcow2"},
		Spec:     &apiv1.ImageSpec{Url: "ftp://x/y", Sha256: "abc", Format: "raw", Nodes: "some"},
	}
	err := validation.ToStatusError("Image", "debian.qcow2", validation.ValidateImage(img))
	if err == nil {
		t.Fatal("the agent accepted an invalid image")
	}
	var diags diag.Diagnostics
	addObjectError(&diags, err, "unix:///x", "create image debian.qcow2", imageKind)
	got := map[string]bool{}
	for _, e := range diags.Errors() {
		if wp, ok := e.(interface{ Path() path.Path }); ok {
			got[wp.Path().String()] = true
		}
	}
	for _, want := range []string{"url", "sha256", "format", "nodes"} {
		if !got[want] {
			t.Errorf("no error on %s; got errors on %v (%v)", want, got, diags)
		}
	}

	diags = nil
	addObjectError(&diags, status.Error(codes.AlreadyExists, `image "debian.qcow2" already exists`), "unix:///x", "create image debian.qcow2", imageKind)
	if len(diags.Errors()) != 1 || !strings.Contains(diags.Errors()[0].Detail(), "terraform import") {
		t.Errorf("AlreadyExists: %v", diags)
	}
	diags = nil
	addObjectError(&diags, status.Error(codes.Unavailable, "connection refused"), "unix:///x", "read image x", imageKind)
	if len(diags.Errors()) != 1 || !strings.Contains(diags.Errors()[0].Detail(), "unreachable") {
		t.Errorf("Unavailable: %v", diags)
	}
}

func TestImageAttributePath(t *testing.T) {
	for in, want := range map[string]string{
		"metadata.name": "name", "spec.url.scheme": "url", "spec.sha256": "sha256", "spec.nodes": "nodes",
		"metadata.labels[a]": "labels", "metadata.labels.a": "labels",
	} {
		if p, ok := imageAttributePath(in); !ok || p.String() != want {
			t.Errorf("imageAttributePath(%q) = %s, %v; want %s", in, p, ok, want)
		}
	}
	for _, in := range []string{"spec", "metadata.annotations", "spec.urlx"} {
		if p, ok := imageAttributePath(in); ok {
			t.Errorf("imageAttributePath(%q) = %s, want none", in, p)
		}
	}
}
