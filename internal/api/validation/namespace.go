package validation

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// ValidateNamespace checks a Namespace as a cluster-admin writes it: its
// name is a DNS-1123 label (it is every namespaced object's namespace),
// the quota's counts and quantities are not negative, and the allowed
// host resources are names such resources can have and port ranges.
func ValidateNamespace(ns *apiv1.Namespace) field.ErrorList {
	md := field.NewPath("metadata")
	errs := ValidateObjectMeta(ns.GetMetadata(), false, md)
	if name := ns.GetMetadata().GetName(); name != "" && len(dns1123Subdomain(name, nil)) == 0 {
		// A subdomain passed as a cluster-scoped name; a namespace is
		// narrower.
		errs = append(errs, dns1123Label(name, md.Child("name"))...)
	}
	spec := field.NewPath("spec")
	errs = append(errs, validateQuota(ns.GetSpec().GetQuota(), spec.Child("quota"))...)
	errs = append(errs, validateAllowed(ns.GetSpec().GetAllowed(), spec.Child("allowed"))...)
	return errs
}

func validateQuota(q *apiv1.NamespaceQuota, path *field.Path) field.ErrorList {
	if q == nil {
		return nil
	}
	var errs field.ErrorList
	for _, c := range []struct {
		name string
		n    *int64
	}{{"vcpus", q.Vcpus}, {"vms", q.Vms}, {"images", q.Images}} {
		if c.n != nil && *c.n < 0 {
			errs = append(errs, field.Invalid(path.Child(c.name), *c.n, "must not be negative"))
		}
	}
	if q.Memory != nil {
		errs = append(errs, validateQuotaQuantity(q.GetMemory(), path.Child("memory"))...)
	}
	for _, class := range sortedKeys(q.GetPersistentStorage()) {
		p := path.Child("persistent_storage").Key(class)
		errs = append(errs, validateClassKey(class, p)...)
		errs = append(errs, validateQuotaQuantity(q.GetPersistentStorage()[class], p)...)
	}
	return errs
}

// validateQuotaQuantity: a quantity of bytes, zero or more.
func validateQuotaQuantity(s string, path *field.Path) field.ErrorList {
	q, err := parseQuantity(s)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(path, s, "must be a quantity such as 64Gi: "+err.Error())}
	case q.Sign() < 0:
		return field.ErrorList{field.Invalid(path, s, "must not be negative")}
	}
	return nil
}

// validateClassKey: a storage class's name, or "" (and "local") for the
// node's disk.
func validateClassKey(class string, path *field.Path) field.ErrorList {
	if class == "" || class == apiv1.StorageClassLocal {
		return nil
	}
	return dns1123Subdomain(class, path)
}

func validateAllowed(a *apiv1.NamespaceAllowed, path *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, b := range a.GetBridges().GetItems() {
		errs = append(errs, validateIfName(b, path.Child("bridges", "items").Index(i))...)
	}
	for i, n := range a.GetNetworks().GetItems() {
		errs = append(errs, validateLibvirtNetworkName(n, path.Child("networks", "items").Index(i))...)
	}
	for i, c := range a.GetStorageClasses().GetItems() {
		errs = append(errs, validateClassKey(c, path.Child("storage_classes", "items").Index(i))...)
	}
	for i, r := range a.GetPortForwardRanges().GetItems() {
		if _, err := ParsePortRange(r); err != nil {
			errs = append(errs, field.Invalid(path.Child("port_forward_ranges", "items").Index(i), r, err.Error()))
		}
	}
	return errs
}

// CheckNamespaceAllowed reports each host resource of spec (an instance
// spec at path) that namespace ns's allowed lists (a, nil for none) leave
// out: bridges, libvirt networks, persistent volumes' storage classes and
// port forwards' host ports. An absent list allows what the host policy
// allows (HostPolicy.Check, which is checked too); a present one narrows
// it. Admission and placement both call it.
func CheckNamespaceAllowed(ns string, a *apiv1.NamespaceAllowed, spec *apiv1.VirtualMachineInstanceSpec, path *field.Path) field.ErrorList {
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	refuse := func(p *field.Path, what, value string, allowed []string) {
		errs = append(errs, field.Forbidden(p, notAllowed(what, value, ns, allowed)))
	}
	bridges, networks, ranges := a.GetBridges(), a.GetNetworks(), a.GetPortForwardRanges()
	for i, n := range spec.GetNetworks() {
		p := path.Child("networks").Index(i)
		if b := n.GetBridge(); b != nil && bridges != nil && !slices.Contains(bridges.GetItems(), b.GetBridge()) {
			refuse(p.Child("bridge", "bridge"), "bridge", b.GetBridge(), bridges.GetItems())
		}
		if ln := n.GetNetwork(); ln != nil && networks != nil && !slices.Contains(networks.GetItems(), ln.GetName()) {
			refuse(p.Child("network", "name"), "libvirt network", ln.GetName(), networks.GetItems())
		}
		if ranges == nil {
			continue
		}
		for j, f := range n.GetUser().GetPortForwards() {
			hp, ok := ForwardHostPort(f)
			if ok && portInRanges(hp.Port, ranges.GetItems()) {
				continue
			}
			refuse(p.Child("user", "port_forwards").Index(j).Child("host_port"), "host port", fmt.Sprint(f.GetHostPort()), ranges.GetItems())
		}
	}
	for i, v := range spec.GetVolumes() {
		if pv := v.GetPersistent(); pv != nil {
			errs = append(errs, CheckNamespaceVolume(ns, a, pv, path.Child("volumes").Index(i).Child("persistent", "storage_class"))...)
		}
	}
	return errs
}

// CheckNamespaceVolume refuses persistent volume pv (its storage class at
// path) when namespace ns's allowed storage classes (a) leave its class
// out: CheckNamespaceAllowed's rule for one volume, which AddVolume
// checks alone.
func CheckNamespaceVolume(ns string, a *apiv1.NamespaceAllowed, pv *apiv1.PersistentVolume, path *field.Path) field.ErrorList {
	classes := a.GetStorageClasses()
	if classes == nil || classAllowed(pv, classes.GetItems()) {
		return nil
	}
	return field.ErrorList{field.Forbidden(path, notAllowed("storage class", StorageClassOf(pv), ns, classes.GetItems()))}
}

// notAllowed is the refusal of a host resource a namespace does not allow.
// The storage class "" (the node's disk) is spelled out, or the list
// would read as empty.
func notAllowed(what, value, ns string, allowed []string) string {
	shown := make([]string, len(allowed))
	for i, a := range allowed {
		shown[i] = cmp.Or(a, `"" (the node's disk)`)
	}
	return fmt.Sprintf("%s %q is not allowed in namespace %s (allowed: %s)", what, value, ns, listOrNone(shown))
}

// classAllowed: the node's disk is "" or "local" in a list.
func classAllowed(pv *apiv1.PersistentVolume, allowed []string) bool {
	if UsesLocalStorage(pv) {
		return slices.Contains(allowed, "") || slices.Contains(allowed, apiv1.StorageClassLocal)
	}
	return slices.Contains(allowed, pv.GetStorageClass())
}

// portInRanges: malformed ranges (validation refuses them) allow nothing.
func portInRanges(port uint16, ranges []string) bool {
	for _, s := range ranges {
		if r, err := ParsePortRange(s); err == nil && r.Contains(port) {
			return true
		}
	}
	return false
}
