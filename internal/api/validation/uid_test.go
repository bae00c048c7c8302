package validation

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

const goodUID = "6f1c2a3e-0000-4000-8000-000000000001"

func TestCheckUID(t *testing.T) {
	for _, uid := range []string{goodUID, uuid.NewString(), "00000000-0000-0000-0000-000000000000"} {
		if err := CheckUID(uid); err != nil {
			t.Errorf("CheckUID(%q): %v", uid, err)
		}
	}
	for _, uid := range []string{
		"", ".", "..", "../../003/victim", "/", "vm-1", strings.Repeat("a", 36),
		strings.ToUpper(goodUID), "{" + goodUID + "}", "urn:uuid:" + goodUID,
		strings.ReplaceAll(goodUID, "-", ""), goodUID[:35] + "/", "../" + goodUID[3:],
		goodUID + "\x00",
	} {
		if err := CheckUID(uid); err == nil {
			t.Errorf("CheckUID(%q) accepted", uid)
		}
	}
	expectErrors(t, ValidateUID("", field.NewPath("metadata", "uid")), required("metadata.uid"))
	expectErrors(t, ValidateUID("../x", field.NewPath("metadata", "uid")), invalid("metadata.uid"))
	expectErrors(t, ValidateUID(goodUID, field.NewPath("metadata", "uid")))
}

func TestValidateInstanceIdentity(t *testing.T) {
	vmi := func(mod func(md *apiv1.ObjectMeta)) *apiv1.VirtualMachineInstance {
		md := &apiv1.ObjectMeta{Namespace: "default", Name: "web", Uid: goodUID,
			OwnerReferences: []*apiv1.OwnerReference{{Kind: apiv1.KindVirtualMachine, Name: "web", Uid: uuid.NewString(), Controller: true}}}
		mod(md)
		return &apiv1.VirtualMachineInstance{Metadata: md}
	}
	expectErrors(t, ValidateInstanceIdentity(vmi(func(*apiv1.ObjectMeta) {})))
	expectErrors(t, ValidateInstanceIdentity(vmi(func(md *apiv1.ObjectMeta) { md.OwnerReferences = nil })))
	expectErrors(t, ValidateInstanceIdentity(nil), required("metadata"))
	expectErrors(t, ValidateInstanceIdentity(vmi(func(md *apiv1.ObjectMeta) { md.Uid = "" })), required("metadata.uid"))
	expectErrors(t, ValidateInstanceIdentity(vmi(func(md *apiv1.ObjectMeta) { md.Uid = "../../003/victim" })), invalid("metadata.uid"))
	expectErrors(t, ValidateInstanceIdentity(vmi(func(md *apiv1.ObjectMeta) { md.OwnerReferences[0].Uid = ".." })),
		invalid("metadata.owner_references[0].uid"))
	// Only the controlling VM's uid names a directory.
	expectErrors(t, ValidateInstanceIdentity(vmi(func(md *apiv1.ObjectMeta) { md.OwnerReferences[0].Controller = false; md.OwnerReferences[0].Uid = "x" })))
	expectErrors(t, ValidateInstanceIdentity(vmi(func(md *apiv1.ObjectMeta) { md.Name = "a/b"; md.Namespace = "" })),
		invalid("metadata.name"), required("metadata.namespace"))
	expectErrors(t, ValidateInstanceIdentity(vmi(func(md *apiv1.ObjectMeta) { md.Namespace = ".." })), invalid("metadata.namespace"))
}
