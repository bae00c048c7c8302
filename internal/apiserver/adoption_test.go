package apiserver

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Adoptions: admins make them; the server labels each with the node its
// spec names, which alone reads it and reports on it, one step at a
// time; a node reports no other node's domains and moves no phase the
// controller owns.
func TestAdoptionsAreTheirNodesAlone(t *testing.T) {
	e := newSecEnv(t, Limits{})
	admin := e.admin()
	a, b := e.join("node-a"), e.join("node-b")

	mk := func(name string) *apiv1.VirtualMachineAdoption {
		t.Helper()
		out, err := admin.Adoptions.Create(ctx(), &apiv1.CreateAdoptionRequest{Adoption: &apiv1.VirtualMachineAdoption{
			// A label naming another node is overwritten from the spec.
			Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{apiv1.LabelNodeName: "node-b"}},
			Spec:     &apiv1.VirtualMachineAdoptionSpec{NodeName: "node-a", DomainName: "legacy-" + name},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	web := mk("web")
	if got := web.GetMetadata().GetLabels()[apiv1.LabelNodeName]; got != "node-a" {
		t.Fatalf("label %q, want node-a (from the spec)", got)
	}
	if web.GetSpec().GetRunStrategy() != apiv1.RunStrategyAlways || web.GetStatus().GetPhase() != apiv1.AdoptionPending {
		t.Errorf("defaults: %v %v", web.GetSpec(), web.GetStatus())
	}

	// Bad input names its field.
	_, err := admin.Adoptions.Create(ctx(), &apiv1.CreateAdoptionRequest{Adoption: &apiv1.VirtualMachineAdoption{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "bad"},
		Spec:     &apiv1.VirtualMachineAdoptionSpec{NodeName: "node-a", DomainName: "../../etc/passwd", RunStrategy: "Once"},
	}})
	wantCode(t, "a hostile domain name", err, codes.InvalidArgument)
	for _, f := range []string{"spec.domain_name", "spec.run_strategy"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not name %s", err, f)
		}
	}

	// Nodes make none, and read only their own.
	_, err = a.c.Adoptions.Create(ctx(), &apiv1.CreateAdoptionRequest{Adoption: web})
	wantCode(t, "a node creating an adoption", err, codes.PermissionDenied)
	_, err = b.c.Adoptions.Get(ctx(), &apiv1.GetAdoptionRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: "web"}})
	wantCode(t, "node-b reading node-a's adoption", err, codes.PermissionDenied)
	_, err = b.c.Adoptions.List(ctx(), &apiv1.ListAdoptionsRequest{Options: &apiv1.ListOptions{LabelSelector: apiv1.LabelNodeName + "=node-a"}})
	wantCode(t, "node-b listing node-a's adoptions", err, codes.PermissionDenied)
	if l, err := a.c.Adoptions.List(ctx(), &apiv1.ListAdoptionsRequest{Options: &apiv1.ListOptions{LabelSelector: apiv1.LabelNodeName + "=node-a"}}); err != nil || len(l.Items) != 1 {
		t.Fatalf("node-a listing its adoptions: %v %v", l, err)
	}

	// Node-b may not report on node-a's domain.
	report := proto.Clone(web).(*apiv1.VirtualMachineAdoption)
	report.Status = &apiv1.VirtualMachineAdoptionStatus{Phase: apiv1.AdoptionMapped, DomainUuid: "6f1c2a3e-0000-4000-8000-00000000d001",
		Spec: &apiv1.VirtualMachineInstanceSpec{}}
	_, err = b.c.Adoptions.UpdateStatus(ctx(), &apiv1.UpdateAdoptionStatusRequest{Adoption: report})
	wantCode(t, "node-b reporting node-a's domain", err, codes.PermissionDenied)
	// Nor may node-a skip the controller's step.
	skip := proto.Clone(web).(*apiv1.VirtualMachineAdoption)
	skip.Status = &apiv1.VirtualMachineAdoptionStatus{Phase: apiv1.AdoptionAdopted, VmUid: "6f1c2a3e-0000-4000-8000-00000000e001"}
	_, err = a.c.Adoptions.UpdateStatus(ctx(), &apiv1.UpdateAdoptionStatusRequest{Adoption: skip})
	wantCode(t, "node-a jumping to Adopted", err, codes.FailedPrecondition)
	// Its report: the mapping, and nothing it does not own (vm_uid).
	report.Status.VmUid = "6f1c2a3e-0000-4000-8000-00000000e001"
	out, err := a.c.Adoptions.UpdateStatus(ctx(), &apiv1.UpdateAdoptionStatusRequest{Adoption: report})
	if err != nil {
		t.Fatalf("node-a reporting its mapping: %v", err)
	}
	if out.GetStatus().GetPhase() != apiv1.AdoptionMapped || out.GetStatus().GetDomainUuid() == "" || out.GetStatus().GetVmUid() != "" {
		t.Errorf("after node-a's report: %v", out.GetStatus())
	}
	// A report once Mapped is refused: the controller's turn.
	out.Status.Phase = apiv1.AdoptionRefused
	_, err = a.c.Adoptions.UpdateStatus(ctx(), &apiv1.UpdateAdoptionStatusRequest{Adoption: out})
	wantCode(t, "node-a refusing after its mapping", err, codes.FailedPrecondition)

	// An invalid status is refused by field, whoever writes it.
	bad := proto.Clone(out).(*apiv1.VirtualMachineAdoption)
	bad.Status = &apiv1.VirtualMachineAdoptionStatus{Phase: "Whatever", Disks: []*apiv1.AdoptedDisk{{Name: "vda", Path: "relative", Format: "vmdk"}}}
	_, err = admin.Adoptions.UpdateStatus(ctx(), &apiv1.UpdateAdoptionStatusRequest{Adoption: bad})
	wantCode(t, "an invalid status", err, codes.InvalidArgument)
	for _, f := range []string{"status.phase", "status.disks[0].path", "status.disks[0].format"} {
		if !strings.Contains(err.Error(), f) {
			t.Errorf("error %q does not name %s", err, f)
		}
	}
}

// The adoption's annotation on a VM template is the server's: no client
// sets or changes it.
func TestServerOwnedTemplateAnnotation(t *testing.T) {
	e := newSecEnv(t, Limits{})
	admin := e.admin()
	vm := &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: &apiv1.VirtualMachineSpec{RunStrategy: apiv1.RunStrategyHalted, Template: &apiv1.VirtualMachineInstanceTemplateSpec{
			Metadata: &apiv1.ObjectMeta{Annotations: map[string]string{apiv1.AnnotationAdoption: "6f1c2a3e-0000-4000-8000-00000000a001"}},
			Spec:     &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "64Mi"}}},
		}},
	}
	_, err := admin.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: vm})
	wantCode(t, "a VM claiming an adoption", err, codes.InvalidArgument)
	if !strings.Contains(err.Error(), "spec.template.metadata.annotations["+apiv1.AnnotationAdoption+"]") {
		t.Errorf("error %q does not name the annotation", err)
	}
	// As the controller makes it (the store), then updated by a client.
	made := proto.Clone(vm).(*apiv1.VirtualMachine)
	made, err = e.st.VMs.Create(ctx(), made)
	if err != nil {
		t.Fatal(err)
	}
	up := proto.Clone(made).(*apiv1.VirtualMachine)
	up.Spec.Template.Metadata.Annotations["team"] = "web"
	if _, err := admin.VMs.Update(ctx(), &apiv1.UpdateVirtualMachineRequest{Vm: up}); err != nil {
		t.Fatalf("an update keeping the annotation: %v", err)
	}
	up = proto.Clone(made).(*apiv1.VirtualMachine)
	up.Spec.Template.Metadata.Annotations[apiv1.AnnotationAdoption] = "6f1c2a3e-0000-4000-8000-00000000a0ff"
	_, err = admin.VMs.Update(ctx(), &apiv1.UpdateVirtualMachineRequest{Vm: up})
	wantCode(t, "changing the adoption annotation", err, codes.InvalidArgument)
}
