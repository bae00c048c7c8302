package backup

import (
	"fmt"
	"maps"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/macaddr"
)

// restorePlan is what a manifest, checked, makes: the new VM and the
// storage classes its volumes need on the writing node.
type restorePlan struct {
	vm *apiv1.VirtualMachine
	// classes are the classes of the volumes that are not local (the
	// node must reach them).
	classes []*apiv1.StorageClass
	// pinned: the VM has local volumes, so it lives on the node that
	// writes them.
	pinned bool
}

// planRestore builds the VM restore r makes from manifest m, which comes
// from a target and is checked as anything a user sends: its spec is
// defaulted and validated as the API validates a VM, its volumes must be
// the spec's persistent volumes on classes of the same kind that exist
// here. The VM is halted and locked by the restore.
func planRestore(r *apiv1.VirtualMachineBackupRestore, m *repo.Manifest, vopts validation.Options, classes informer.Lister[*apiv1.StorageClass]) (*restorePlan, error) {
	if len(m.Spec) == 0 {
		return nil, fmt.Errorf("backup %s carries no VM spec", m.ID)
	}
	var src apiv1.VirtualMachine
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(m.Spec, &src); err != nil {
		return nil, fmt.Errorf("backup %s: its VM spec does not parse: %v", m.ID, err)
	}
	sp := r.GetSpec()
	spec := src.GetSpec()
	if spec == nil {
		spec = &apiv1.VirtualMachineSpec{}
	}
	//lint:ignore SA1019 a restored VM is Halted: the backup's deprecated flag must not override it
	spec.Running = nil
	spec.RunStrategy = apiv1.RunStrategyHalted
	tmpl := spec.GetTemplate().GetSpec()
	if sp.GetNewIdentity() {
		for _, i := range tmpl.GetDomain().GetDevices().GetInterfaces() {
			i.MacAddress = sp.GetMacAddresses()[i.GetName()]
		}
	}
	labels := maps.Clone(src.GetMetadata().GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, sp.GetLabels())
	annotations := maps.Clone(src.GetMetadata().GetAnnotations())
	if annotations == nil {
		annotations = map[string]string{}
	}
	maps.Copy(annotations, sp.GetAnnotations())
	annotations[apiv1.AnnotationRestoredFrom] = sp.GetTarget() + "/" + sp.GetBackupId()
	annotations[apiv1.AnnotationLastRestore] = apiv1.LastRestoreValue(r.GetMetadata().GetName(), r.GetMetadata().GetUid())
	vm := &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: r.GetMetadata().GetNamespace(), Name: sp.GetVmName(), Labels: labels, Annotations: annotations},
		Spec:     spec,
	}
	validation.DefaultVirtualMachine(vm)
	macaddr.Assign(vm.GetSpec().GetTemplate().GetSpec(), nil)
	if errs := validation.ValidateVirtualMachine(vm, vopts); len(errs) > 0 {
		return nil, fmt.Errorf("backup %s: its VM is not valid here: %v", m.ID, errs.ToAggregate())
	}
	vm.Status = &apiv1.VirtualMachineStatus{RestoreInProgress: RestoreLock(r.GetMetadata().GetName())}

	plan := &restorePlan{vm: vm}
	pvs := map[string]*apiv1.PersistentVolume{}
	for _, v := range vm.GetSpec().GetTemplate().GetSpec().GetVolumes() {
		if pv := v.GetPersistent(); pv != nil {
			pvs[v.GetName()] = pv
		}
	}
	seen := map[string]bool{}
	for i, v := range m.Volumes {
		pv, ok := pvs[v.Name]
		if !ok {
			return nil, fmt.Errorf("backup %s: volumes[%d] %q is no persistent volume of its VM", m.ID, i, v.Name)
		}
		kind := apiv1.ClassKindLocal
		if !pv.IsLocal() {
			sc, ok := classes.Get("", pv.GetStorageClass())
			if !ok {
				return nil, fmt.Errorf("volume %q: storage class %q does not exist in this cluster (the backup's VM has it at spec.template.spec.volumes)", v.Name, pv.GetStorageClass())
			}
			kind = classKind(sc)
			if !seen[sc.GetMetadata().GetName()] {
				seen[sc.GetMetadata().GetName()] = true
				plan.classes = append(plan.classes, sc)
			}
		}
		if kind != v.ClassKind {
			return nil, fmt.Errorf("volume %q was backed up from a %s class; storage class %q here is %s", v.Name, kindWords(v.ClassKind), validation.StorageClassOf(pv), kindWords(kind))
		}
		if kind != apiv1.ClassKindRBD {
			plan.pinned = plan.pinned || kind == apiv1.ClassKindLocal
		}
	}
	return plan, nil
}

// classKind is the kind of a storage class, as manifests name it.
func classKind(sc *apiv1.StorageClass) string {
	switch {
	case sc.GetSpec().GetRbd() != nil:
		return apiv1.ClassKindRBD
	case sc.GetSpec().GetSharedFilesystem() != nil:
		return apiv1.ClassKindSharedFilesystem
	}
	return ""
}

func kindWords(k string) string {
	if k == "" {
		return "unknown"
	}
	return strings.ReplaceAll(k, "_", " ")
}
