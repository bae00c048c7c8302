package apiserver

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestVMIUpdateStatusCAS(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	vmi, err := f.st.VMIs.Create(ctx, &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web", Labels: map[string]string{"a": "b"}},
		Spec:     &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "128Mi"}}},
		Status:   &apiv1.VirtualMachineInstanceStatus{Phase: "Scheduled", NodeName: "n1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	upd := proto.Clone(vmi).(*apiv1.VirtualMachineInstance)
	upd.Status.Phase = "Running"
	upd.Spec.Paused = true    // ignored: only status is taken
	upd.Metadata.Labels = nil // ignored
	out, err := f.vmis.UpdateStatus(ctx, &apiv1.UpdateVirtualMachineInstanceStatusRequest{Vmi: upd})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status.Phase != "Running" || out.Spec.Paused || out.Metadata.Labels["a"] != "b" {
		t.Fatalf("status update changed more than status: %v", out)
	}
	// The old version loses.
	if _, err := f.vmis.UpdateStatus(ctx, &apiv1.UpdateVirtualMachineInstanceStatusRequest{Vmi: upd}); code(err) != codes.Aborted {
		t.Fatalf("stale status update: %v", err)
	}
	upd.Metadata.ResourceVersion = 0
	if _, err := f.vmis.UpdateStatus(ctx, &apiv1.UpdateVirtualMachineInstanceStatusRequest{Vmi: upd}); code(err) != codes.InvalidArgument {
		t.Fatalf("versionless status update: %v", err)
	}
	got, err := f.vmis.Get(ctx, &apiv1.GetVirtualMachineInstanceRequest{Key: &apiv1.ObjectKey{Name: "web"}})
	if err != nil || !proto.Equal(got, out) {
		t.Fatalf("get: %v", err)
	}
}
