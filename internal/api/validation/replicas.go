package validation

import (
	"fmt"
	"maps"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// MaxReplicas bounds spec.replicas of a replica set or pool. Each replica
// is a VM or an instance with its own writes and watch events; a typo of
// a few zeros should be refused, not fill the store (one VM's objects take
// a few KiB, so 5000 stay far below etcd's default quota).
const MaxReplicas = 5000

// ValidateReplicas checks a replica count: spec.replicas, or a Scale
// request's.
func ValidateReplicas(n int32, path *field.Path) field.ErrorList {
	if n < 0 || n > MaxReplicas {
		return field.ErrorList{field.Invalid(path, n, fmt.Sprintf("must be between 0 and %d", MaxReplicas))}
	}
	return nil
}

// ValidateReplicaSet checks a replica set as submitted (after
// DefaultReplicaSet). Status is server-owned and not checked.
func ValidateReplicaSet(rs *apiv1.VirtualMachineInstanceReplicaSet, opts Options) field.ErrorList {
	errs := validateReplicaMeta(rs.GetMetadata(), apiv1.MaxReplicaSetNameLen,
		fmt.Sprintf("its instances are named <name>-<%d random characters>", apiv1.ReplicaSetSuffixLen))
	spec := field.NewPath("spec")
	s := rs.GetSpec()
	if s == nil {
		return append(errs, field.Required(spec, ""))
	}
	tp := spec.Child("template")
	tmpl := s.GetTemplate()
	errs = append(errs, validateReplicaCommon(s.Replicas, s.GetSelector(), tmpl.GetMetadata(), tmpl != nil, spec, tp)...)
	if tmpl != nil {
		ts := tp.Child("spec")
		errs = append(errs, ValidateVirtualMachineInstanceSpec(tmpl.GetSpec(), ts, opts)...)
		errs = append(errs, validateNoFixedMACs(tmpl.GetSpec(), ts)...)
		// A persistent volume belongs to a VM: the node keeps it under the
		// VM's uid, which every instance of a replica set would share (the
		// replica set's), and deletes it with the VM, which they have none
		// of. Replicas that keep their disks are a pool's VMs.
		for i, v := range tmpl.GetSpec().GetVolumes() {
			if v.GetPersistent() != nil {
				errs = append(errs, field.Forbidden(ts.Child("volumes").Index(i).Child("persistent"),
					"the instances of a replica set have no VM to keep a persistent volume for; use a VirtualMachinePool for replicas with disks of their own"))
			}
		}
	}
	return append(errs, validateReplicaSize(rs)...)
}

// ValidateReplicaSetUpdate checks newRS, that it is the stored object, and
// that its selector did not change (KubeVirt's admitter: the selector
// decides which instances are the replica set's, and a new one would
// orphan them all at once). A nil oldRS leaves nothing to compare against.
func ValidateReplicaSetUpdate(newRS, oldRS *apiv1.VirtualMachineInstanceReplicaSet, opts Options) field.ErrorList {
	errs := ValidateReplicaSet(newRS, opts)
	if oldRS == nil {
		return errs
	}
	errs = append(errs, validateIdentityUpdate(newRS.GetMetadata(), oldRS.GetMetadata())...)
	return append(errs, validateSelectorUnchanged(newRS.GetSpec().GetSelector(), oldRS.GetSpec().GetSelector())...)
}

// ValidatePool checks a pool as submitted (after DefaultPool). Status is
// server-owned and not checked.
func ValidatePool(p *apiv1.VirtualMachinePool, opts Options) field.ErrorList {
	errs := validateReplicaMeta(p.GetMetadata(), apiv1.MaxPoolNameLen, "its VMs are named <name>-<ordinal>")
	spec := field.NewPath("spec")
	s := p.GetSpec()
	if s == nil {
		return append(errs, field.Required(spec, ""))
	}
	tp := spec.Child("virtual_machine_template")
	tmpl := s.GetVirtualMachineTemplate()
	errs = append(errs, validateReplicaCommon(s.Replicas, s.GetSelector(), tmpl.GetMetadata(), tmpl != nil, spec, tp)...)
	if tmpl != nil {
		errs = append(errs, validateVMSpec(tmpl.GetSpec(), tp.Child("spec"), opts)...)
		errs = append(errs, validateNoFixedMACs(tmpl.GetSpec().GetTemplate().GetSpec(), tp.Child("spec", "template", "spec"))...)
	}
	if v := s.GetMaxUnavailable(); v != "" {
		if _, _, err := apiv1.ParseMaxUnavailable(v); err != nil {
			// The error quotes v, which the field error does already.
			errs = append(errs, field.Invalid(spec.Child("max_unavailable"), v, apiv1.ErrMaxUnavailable.Error()))
		}
	}
	if o := s.GetScaleInOrder(); o != "" {
		errs = append(errs, oneOf(o, spec.Child("scale_in_order"), apiv1.ScaleInOrders())...)
	}
	return append(errs, validateReplicaSize(p)...)
}

// ValidatePoolUpdate is ValidateReplicaSetUpdate for a pool; its VMs'
// persistent volumes keep their storage classes too
// (ValidateVolumeStorageClassUpdate).
func ValidatePoolUpdate(newPool, oldPool *apiv1.VirtualMachinePool, opts Options) field.ErrorList {
	errs := append(ValidatePool(newPool, opts), ValidateVolumeStorageClassUpdate(poolInstanceSpec(newPool), poolInstanceSpec(oldPool),
		field.NewPath("spec", "virtual_machine_template", "spec", "template", "spec"))...)
	if oldPool == nil {
		return errs
	}
	errs = append(errs, validateIdentityUpdate(newPool.GetMetadata(), oldPool.GetMetadata())...)
	errs = append(errs, validateSelectorUnchanged(newPool.GetSpec().GetSelector(), oldPool.GetSpec().GetSelector())...)
	// Each VM's volumes are made from the template: they grow with it,
	// never shrink, keep their image.
	return append(errs, ValidatePersistentVolumeUpdate(newPool.GetSpec().GetVirtualMachineTemplate().GetSpec().GetTemplate().GetSpec(),
		oldPool.GetSpec().GetVirtualMachineTemplate().GetSpec().GetTemplate().GetSpec(),
		field.NewPath("spec", "virtual_machine_template", "spec", "template", "spec"))...)
}

// validateReplicaCommon checks what both replica kinds' specs have: the
// replica count, the selector against the template's labels, and the
// template (at tp, required) with its labels and annotations.
func validateReplicaCommon(replicas *int32, sel *apiv1.LabelSelector, tmplMeta *apiv1.ObjectMeta, haveTemplate bool, spec, tp *field.Path) field.ErrorList {
	var errs field.ErrorList
	if replicas != nil {
		errs = append(errs, ValidateReplicas(*replicas, spec.Child("replicas"))...)
	}
	errs = append(errs, validateSelector(sel, tmplMeta.GetLabels(), spec.Child("selector"), tp.Child("metadata", "labels"))...)
	if !haveTemplate {
		return append(errs, field.Required(tp, ""))
	}
	errs = append(errs, validateLabels(tmplMeta.GetLabels(), tp.Child("metadata", "labels"))...)
	return append(errs, validateAnnotations(tmplMeta.GetAnnotations(), tp.Child("metadata", "annotations"))...)
}

// validateReplicaMeta is ValidateObjectMeta for a namespaced replica kind,
// whose name is at most max so that the names made from it (why) stay
// DNS labels.
func validateReplicaMeta(meta *apiv1.ObjectMeta, max int, why string) field.ErrorList {
	path := field.NewPath("metadata")
	errs := ValidateObjectMeta(meta, true, path)
	if n := meta.GetName(); len(n) > max {
		e := field.TooLong(path.Child("name"), n, max)
		e.Detail += ": " + why + ", which must stay at most 63 characters"
		errs = append(errs, e)
	}
	return errs
}

// validateSelector checks a replica kind's selector: required, at least
// one label, and matching the template's labels (templatePath), or what
// the controller makes would never count as its own and it would make
// more forever.
func validateSelector(sel *apiv1.LabelSelector, templateLabels map[string]string, path, templatePath *field.Path) field.ErrorList {
	if sel == nil {
		return field.ErrorList{field.Required(path, fmt.Sprintf("selects what belongs to this object; it must match the template's labels (%s)", templatePath))}
	}
	ml := path.Child("match_labels")
	if len(sel.GetMatchLabels()) == 0 {
		return field.ErrorList{field.Required(ml, "at least one label: an empty selector would select everything in the namespace")}
	}
	if errs := validateLabels(sel.GetMatchLabels(), ml); len(errs) > 0 {
		return errs
	}
	if !sel.Matches(templateLabels) {
		return field.ErrorList{field.Invalid(path, apiv1.SelectorString(sel), fmt.Sprintf("does not match the template's labels (%s)", templatePath))}
	}
	return nil
}

// validateSelectorUnchanged refuses a changed selector, in KubeVirt's words.
func validateSelectorUnchanged(newSel, oldSel *apiv1.LabelSelector) field.ErrorList {
	if maps.Equal(newSel.GetMatchLabels(), oldSel.GetMatchLabels()) {
		return nil
	}
	return field.ErrorList{field.Invalid(field.NewPath("spec", "selector"), apiv1.SelectorString(newSel), "selector is immutable after creation")}
}

// validateNoFixedMACs refuses MAC addresses in a template: every replica
// would get the same one. Left empty, each replica gets its own when its
// VM or instance is made.
func validateNoFixedMACs(spec *apiv1.VirtualMachineInstanceSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, iface := range spec.GetDomain().GetDevices().GetInterfaces() {
		if iface.GetMacAddress() != "" {
			errs = append(errs, field.Forbidden(path.Child("domain", "devices", "interfaces").Index(i).Child("mac_address"),
				"every replica would have the same MAC address; leave it empty and each gets its own"))
		}
	}
	return errs
}

// validateReplicaSize is validateVMSize for a replica kind: the whole
// object within MaxObjectBytes, so that it and what is made from its
// template fit the store.
func validateReplicaSize(m proto.Message) field.ErrorList {
	n := proto.Size(m)
	if n <= MaxObjectBytes {
		return nil
	}
	e := field.TooLong(field.NewPath("spec"), "", MaxObjectBytes)
	e.Detail = fmt.Sprintf("the object encodes to %d bytes, more than the %d allowed", n, MaxObjectBytes)
	return field.ErrorList{e}
}

// DefaultReplicaSet is DefaultVirtualMachine for a replica set: one
// replica unless it says, and its template defaulted as a VM's is. The
// selector is left as it is: one is required, and none is made up.
func DefaultReplicaSet(rs *apiv1.VirtualMachineInstanceReplicaSet) {
	if rs == nil {
		return
	}
	DiscardUnknown(rs)
	rs.Metadata = defaultMetadata(rs.Metadata)
	if rs.Spec == nil {
		rs.Spec = &apiv1.VirtualMachineInstanceReplicaSetSpec{}
	}
	if rs.Spec.Replicas == nil {
		n := apiv1.DefaultReplicas
		rs.Spec.Replicas = &n
	}
	rs.Spec.Template = defaultInstanceTemplate(rs.Spec.Template)
}

// DefaultPool is DefaultVirtualMachine for a pool: one replica, KubeVirt's
// max_unavailable, the highest ordinals first on scale-in, and its VM
// template defaulted as a VM is.
func DefaultPool(p *apiv1.VirtualMachinePool) {
	if p == nil {
		return
	}
	DiscardUnknown(p)
	p.Metadata = defaultMetadata(p.Metadata)
	if p.Spec == nil {
		p.Spec = &apiv1.VirtualMachinePoolSpec{}
	}
	spec := p.Spec
	if spec.Replicas == nil {
		n := apiv1.DefaultReplicas
		spec.Replicas = &n
	}
	if spec.MaxUnavailable == "" {
		spec.MaxUnavailable = apiv1.DefaultMaxUnavailable
	}
	if spec.ScaleInOrder == "" {
		spec.ScaleInOrder = apiv1.DefaultScaleInOrder
	}
	if spec.VirtualMachineTemplate == nil {
		spec.VirtualMachineTemplate = &apiv1.VirtualMachineTemplateSpec{}
	}
	vt := spec.VirtualMachineTemplate
	vt.Metadata = templateMetadata(vt.Metadata)
	vt.Spec = defaultVMSpec(vt.Spec)
}
