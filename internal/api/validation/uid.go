package validation

import (
	"errors"
	"fmt"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// uidLen is the length of a UUID in its canonical form
// (8-4-4-4-12 hex digits), the only form the store writes.
const uidLen = 36

// ErrInvalidUID: a uid that is not a UUID in canonical form.
var ErrInvalidUID = errors.New("uid must be a UUID such as 6f1c2a3e-0000-4000-8000-000000000001")

// CheckUID reports whether uid is a UUID in the canonical lowercase
// 8-4-4-4-12 form the store gives every object. Node agents name
// directories after uids (<node>/vmis/<uid>), so this rule is what keeps an
// object's uid from being a path: a UUID is one path element, never "",
// "." or "..", and holds no "/". uuid.Parse alone would also take
// "{...}", "urn:uuid:..." and upper case, which are other spellings (other
// directories) of the same UUID.
func CheckUID(uid string) error {
	if len(uid) != uidLen {
		return fmt.Errorf("%w: %q", ErrInvalidUID, clip(uid))
	}
	u, err := uuid.Parse(uid)
	if err != nil || u.String() != uid {
		return fmt.Errorf("%w: %q", ErrInvalidUID, clip(uid))
	}
	return nil
}

// ValidateUID checks that uid is a UUID (CheckUID); empty is Required.
func ValidateUID(uid string, path *field.Path) field.ErrorList {
	if uid == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	if CheckUID(uid) != nil {
		return field.ErrorList{field.Invalid(path, uid, "must be a UUID in canonical form such as 6f1c2a3e-0000-4000-8000-000000000001")}
	}
	return nil
}

// ValidateObjectKey checks a namespace/name a request names an object by:
// both DNS-1123 labels, as every stored namespaced object's are. An empty
// namespace means the default one and is not an error here.
func ValidateObjectKey(namespace, name string, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	if namespace != "" {
		errs = append(errs, dns1123Label(namespace, path.Child("namespace"))...)
	}
	if name == "" {
		return append(errs, field.Required(path.Child("name"), ""))
	}
	return append(errs, dns1123Label(name, path.Child("name"))...)
}

// ValidateInstanceIdentity checks what a node agent builds host paths and
// libvirt names from when it handles vmi: its namespace and name
// (DNS-1123 labels: the domain name is namespace_name), its uid and the uid
// of the VM that controls it (UUIDs: <node>/vmis/<uid>, <node>/vms/<uid>).
// The API sets all of them, but the node does not trust that nothing else
// wrote the store: an instance that fails this is refused, never a path.
func ValidateInstanceIdentity(vmi *apiv1.VirtualMachineInstance) field.ErrorList {
	md := vmi.GetMetadata()
	p := field.NewPath("metadata")
	if md == nil {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	if md.GetNamespace() == "" {
		errs = append(errs, field.Required(p.Child("namespace"), ""))
	}
	errs = append(errs, ValidateObjectKey(md.GetNamespace(), md.GetName(), p)...)
	errs = append(errs, ValidateUID(md.GetUid(), p.Child("uid"))...)
	for i, o := range md.GetOwnerReferences() {
		if o.GetKind() == apiv1.KindVirtualMachine && o.GetController() {
			errs = append(errs, ValidateUID(o.GetUid(), p.Child("owner_references").Index(i).Child("uid"))...)
		}
	}
	return errs
}
