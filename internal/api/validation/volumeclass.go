package validation

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// ValidateVolumeStorageClassUpdate checks what an update of an instance
// template (oldSpec → newSpec, at path) does to the storage class of the
// persistent volumes both name (a volume is known by its name, as
// ValidatePersistentVolumeUpdate knows it): it may not change. The volume
// exists on its class once made; a template naming another class would
// have its nodes look for it where it is not, or make an empty one there.
// No class and "local" are the same class. A volume is renamed to get a
// new one on another class; volumes only in newSpec are new, and free.
// The API (ValidateVirtualMachineUpdate, ValidatePoolUpdate) and the
// provider (plan time) both ask this.
func ValidateVolumeStorageClassUpdate(newSpec, oldSpec *apiv1.VirtualMachineInstanceSpec, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	eachKeptVolume(newSpec, oldSpec, func(i int, name string, pv, was *apiv1.PersistentVolume) {
		if from, to := StorageClassOf(was), StorageClassOf(pv); from != to {
			errs = append(errs, field.Invalid(path.Child("volumes").Index(i).Child("persistent", "storage_class"), pv.GetStorageClass(),
				fmt.Sprintf("may not change from %s to %s: the volume %q exists on its class "+
					"(rename the disk to get a new volume on another class)", from, to, name)))
		}
	})
	return errs
}

// eachKeptVolume calls fn with each persistent volume of newSpec (at index
// i) that oldSpec has too, by name, and the old one: the volumes an
// update keeps, which the update rules compare.
func eachKeptVolume(newSpec, oldSpec *apiv1.VirtualMachineInstanceSpec, fn func(i int, name string, pv, was *apiv1.PersistentVolume)) {
	old := map[string]*apiv1.PersistentVolume{}
	for _, v := range oldSpec.GetVolumes() {
		if pv := v.GetPersistent(); pv != nil {
			old[v.GetName()] = pv
		}
	}
	for i, v := range newSpec.GetVolumes() {
		if pv, was := v.GetPersistent(), old[v.GetName()]; pv != nil && was != nil {
			fn(i, v.GetName(), pv, was)
		}
	}
}

// poolInstanceSpec is the instance spec of a pool's VMs. Nil-safe.
func poolInstanceSpec(p *apiv1.VirtualMachinePool) *apiv1.VirtualMachineInstanceSpec {
	return p.GetSpec().GetVirtualMachineTemplate().GetSpec().GetTemplate().GetSpec()
}
