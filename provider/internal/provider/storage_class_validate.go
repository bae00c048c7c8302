package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// Plan-time checks of virtplane_storage_class. Each asks the agent's own
// validation (validation.ValidateStorageClass) about one field, set into
// an otherwise empty class, and keeps what it says about that field: the
// provider and the agent cannot disagree on a monitor, a pool, a key.

// storageClassFieldErrors validates a class that set made, and returns the
// errors about fieldPath (and what is under it). The key is not required
// (only its shape is checked when set): the field under test is the only
// one that matters.
func storageClassFieldErrors(set func(*apiv1.StorageClass), fieldPath string) field.ErrorList {
	sc := &apiv1.StorageClass{Metadata: &apiv1.ObjectMeta{Name: "x"}, Spec: &apiv1.StorageClassSpec{Rbd: &apiv1.RBDStorage{}}}
	set(sc)
	var out field.ErrorList
	for _, e := range validation.ValidateStorageClass(sc, false) {
		if e.Field == fieldPath || strings.HasPrefix(e.Field, fieldPath+".") || strings.HasPrefix(e.Field, fieldPath+"[") {
			out = append(out, e)
		}
	}
	return out
}

// addStorageClassErrors reports errs on the attributes their fields map
// to (fallback where one does not). The value shown is the error's, which
// for the key is "(hidden)": validation never echoes a key.
func addStorageClassErrors(diags *diag.Diagnostics, fallback path.Path, errs field.ErrorList) {
	for _, e := range errs {
		p, ok := storageClassAttributePath(e.Field)
		if !ok {
			p = fallback
		}
		addFieldErrors(diags, p, fmt.Sprint(e.BadValue), field.ErrorList{e})
	}
}

// storageClassNameValidator: a DNS-1123 label (the name is a directory on
// the nodes), not the built-in "local".
func storageClassNameValidator() validator.String {
	return stringCheck{
		describedAs: "must be a DNS-1123 label other than `local`",
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			addStorageClassErrors(diags, p, storageClassFieldErrors(func(sc *apiv1.StorageClass) { sc.Metadata.Name = s }, "metadata.name"))
		},
	}
}

// storageClassFieldValidator checks a string attribute of a block, the
// API's field fieldPath: spec.rbd.pool, .user, .key,
// spec.shared_filesystem.path.
func storageClassFieldValidator(fieldPath string) validator.String {
	set := map[string]func(*apiv1.StorageClass, string){
		"spec.rbd.pool": func(sc *apiv1.StorageClass, s string) { sc.Spec.Rbd.Pool = s },
		"spec.rbd.user": func(sc *apiv1.StorageClass, s string) { sc.Spec.Rbd.User = s },
		// Spaces around it are dropped (cephxKey), as create does.
		"spec.rbd.key": func(sc *apiv1.StorageClass, s string) { sc.Spec.Rbd.Key = strings.TrimSpace(s) },
		"spec.shared_filesystem.path": func(sc *apiv1.StorageClass, s string) {
			sc.Spec = &apiv1.StorageClassSpec{SharedFilesystem: &apiv1.SharedFilesystemStorage{Path: s}}
		},
	}[fieldPath]
	return stringCheck{
		describedAs: describedAs("must be what the agent accepts as " + fieldPath),
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			addStorageClassErrors(diags, p, storageClassFieldErrors(func(sc *apiv1.StorageClass) { set(sc, s) }, fieldPath))
		},
	}
}

// storageClassMonitorsValidator checks the monitors, each known one as the
// agent does (an IP literal and a port, spelt as netip spells it, each
// once); unknown ones are checked once known.
func storageClassMonitorsValidator() validator.List {
	return listCheck{
		describedAs: "each must be IP:port, an IP literal (`[IPv6]:port`), each once",
		check: func(p path.Path, elems []attr.Value, diags *diag.Diagnostics) {
			var mons []string
			var at []int // the list index of each of mons
			for i, e := range elems {
				if s, ok := e.(types.String); ok && !s.IsNull() && !s.IsUnknown() {
					mons, at = append(mons, s.ValueString()), append(at, i)
				}
			}
			for _, e := range storageClassFieldErrors(func(sc *apiv1.StorageClass) { sc.Spec.Rbd.Monitors = mons }, "spec.rbd.monitors") {
				// The count is listvalidator's to report, in the
				// configuration's terms; each monitor is at its own index.
				_, args := normalizeFieldPath(e.Field)
				if len(args) != 1 {
					continue
				}
				var i int
				if _, err := fmt.Sscan(args[0], &i); err != nil || i >= len(at) {
					continue
				}
				addFieldErrors(diags, p.AtListIndex(at[i]), fmt.Sprint(e.BadValue), field.ErrorList{e})
			}
		},
	}
}

// listCheck is stringCheck for list attributes: check sees the elements
// of a known, non-null list.
type listCheck struct {
	describedAs
	check func(p path.Path, elems []attr.Value, diags *diag.Diagnostics)
}

var _ validator.List = listCheck{}

func (v listCheck) ValidateList(_ context.Context, req validator.ListRequest, resp *validator.ListResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	v.check(req.Path, req.ConfigValue.Elements(), &resp.Diagnostics)
}

// ValidateConfig checks what involves the blocks: exactly one kind (the
// agent's rule, with its words), and every attribute of the block set.
func (r *storageClassResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var rbd, shared types.Object
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("rbd"), &rbd)...)
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("shared_filesystem"), &shared)...)
	if resp.Diagnostics.HasError() || rbd.IsUnknown() || shared.IsUnknown() {
		return
	}
	spec := &apiv1.StorageClassSpec{}
	if !rbd.IsNull() {
		spec.Rbd = &apiv1.RBDStorage{}
	}
	if !shared.IsNull() {
		spec.SharedFilesystem = &apiv1.SharedFilesystemStorage{}
	}
	sc := &apiv1.StorageClass{Metadata: &apiv1.ObjectMeta{Name: "x"}, Spec: spec}
	for _, e := range validation.ValidateStorageClass(sc, false) {
		if e.Field == "spec" {
			resp.Diagnostics.AddError("Invalid storage class", "A virtplane_storage_class must "+
				strings.TrimSuffix(e.Detail, ".")+" blocks.")
			return
		}
	}
	required := func(block string, obj types.Object, attrs ...string) {
		for _, a := range attrs {
			if v, ok := obj.Attributes()[a]; ok && v.IsNull() {
				resp.Diagnostics.AddAttributeError(path.Root(block).AtName(a), "Missing "+a,
					fmt.Sprintf("%s.%s is required in the %s block.", block, a, block))
			}
		}
	}
	if !rbd.IsNull() {
		required("rbd", rbd, "monitors", "pool", "user", "key")
	}
	if !shared.IsNull() {
		required("shared_filesystem", shared, "path")
	}
}
