// Package nsquota is the arithmetic of namespace quotas (tenancy.proto,
// NamespaceQuota): what one stored object asks of its namespace, sums and
// differences of such asks, and the check of an increase against a
// quota with Kubernetes' ResourceQuota wording. It is pure: the store
// (internal/store, accounting.go) applies it in the transaction of every
// write, and the usage reconciler recomputes namespaces' usage with it,
// so both count the same way.
package nsquota

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Usage is what objects ask of a namespace, in NamespaceQuota's units:
// memory and storage in bytes. The zero value asks nothing. Storage is
// keyed by storage class name, "" for volumes on the node's disk.
type Usage struct {
	VCPUs   int64
	Memory  int64
	VMs     int64
	Storage map[string]int64
	Images  int64
}

// IsZero reports whether u asks nothing.
func (u Usage) IsZero() bool {
	if u.VCPUs != 0 || u.Memory != 0 || u.VMs != 0 || u.Images != 0 {
		return false
	}
	for _, v := range u.Storage {
		if v != 0 {
			return false
		}
	}
	return true
}

// Add returns u + v.
func (u Usage) Add(v Usage) Usage { return u.combine(v, 1) }

// Sub returns u - v.
func (u Usage) Sub(v Usage) Usage { return u.combine(v, -1) }

func (u Usage) combine(v Usage, sign int64) Usage {
	out := Usage{
		VCPUs:  u.VCPUs + sign*v.VCPUs,
		Memory: u.Memory + sign*v.Memory,
		VMs:    u.VMs + sign*v.VMs,
		Images: u.Images + sign*v.Images,
	}
	for class, n := range u.Storage {
		out.addStorage(class, n)
	}
	for class, n := range v.Storage {
		out.addStorage(class, sign*n)
	}
	return out
}

// addStorage adds n bytes to class, dropping classes that come to zero so
// that equal usages compare equal.
func (u *Usage) addStorage(class string, n int64) {
	if n == 0 {
		return
	}
	if u.Storage == nil {
		u.Storage = map[string]int64{}
	}
	u.Storage[class] += n
	if u.Storage[class] == 0 {
		delete(u.Storage, class)
	}
}

// Equal reports whether u and v ask the same.
func (u Usage) Equal(v Usage) bool { return u.Sub(v).IsZero() }

// StorageClassKey is the quota key of a persistent volume's storage
// class: "" for the node's disk, which the API spells "" or "local".
func StorageClassKey(class string) string {
	if class == apiv1.StorageClassLocal {
		return ""
	}
	return class
}

// OfVM is what a VM asks, running or not (as Kubernetes counts requests
// of every pod it stores): its template's vCPUs and guest memory, one VM,
// and its persistent volumes' sizes.
func OfVM(vm *apiv1.VirtualMachine) Usage {
	spec := vm.GetSpec().GetTemplate().GetSpec()
	u := ofInstance(spec)
	for _, v := range spec.GetVolumes() {
		if p := v.GetPersistent(); p != nil {
			u.addStorage(StorageClassKey(p.GetStorageClass()), quantityBytes(p.GetSize()))
		}
	}
	return u
}

// OfVMI is what an instance asks beyond its VM: nothing for a VM's
// instance (its VM is counted), vCPUs, memory and one VM for any other
// (a replica set's, or a bare one), which has no VM to be counted by.
func OfVMI(vmi *apiv1.VirtualMachineInstance) Usage {
	if apiv1.ControllingVMUID(vmi) != "" {
		return Usage{}
	}
	return ofInstance(vmi.GetSpec())
}

func ofInstance(spec *apiv1.VirtualMachineInstanceSpec) Usage {
	cpu := spec.GetDomain().GetCpu()
	return Usage{
		VCPUs:  count(cpu.GetSockets()) * count(cpu.GetCores()) * count(cpu.GetThreads()),
		Memory: quantityBytes(spec.GetDomain().GetMemory().GetGuest()),
		VMs:    1,
	}
}

// count is a CPU topology count as validation defaults it: unset is 1.
// Negative counts never pass validation; they count as 1 here so that
// usage never goes negative.
func count(n int32) int64 {
	if n <= 0 {
		return 1
	}
	return int64(n)
}

// quantityBytes is a quantity's value in bytes, rounded up; 0 for an
// empty or malformed one (validation refuses those before they are
// stored).
func quantityBytes(s string) int64 {
	if s == "" {
		return 0
	}
	q, err := resource.ParseQuantity(s)
	if err != nil || q.Sign() < 0 {
		return 0
	}
	return q.Value()
}

// ImageNamespace is the namespace an image counts against: its
// LabelOwnerNamespace, "" for a cluster-admin's image.
func ImageNamespace(img *apiv1.Image) string {
	return img.GetMetadata().GetLabels()[apiv1.LabelOwnerNamespace]
}

// OfImage is what an image asks of ImageNamespace(img).
func OfImage(img *apiv1.Image) Usage {
	if ImageNamespace(img) == "" {
		return Usage{}
	}
	return Usage{Images: 1}
}

// FromAPI reads a NamespaceUsage; malformed quantities count as 0 (only
// the server writes them).
func FromAPI(u *apiv1.NamespaceUsage) Usage {
	out := Usage{VCPUs: u.GetVcpus(), Memory: quantityBytes(u.GetMemory()), VMs: u.GetVms(), Images: u.GetImages()}
	for class, q := range u.GetPersistentStorage() {
		out.addStorage(class, quantityBytes(q))
	}
	return out
}

// ToAPI is u as NamespaceUsage shows it: bytes as binary quantities
// ("12Gi"), storage classes that use nothing left out.
func (u Usage) ToAPI() *apiv1.NamespaceUsage {
	out := &apiv1.NamespaceUsage{Vcpus: u.VCPUs, Memory: Bytes(u.Memory), Vms: u.VMs, Images: u.Images}
	for _, class := range slices.Sorted(maps.Keys(u.Storage)) {
		if n := u.Storage[class]; n != 0 {
			if out.PersistentStorage == nil {
				out.PersistentStorage = map[string]string{}
			}
			out.PersistentStorage[class] = Bytes(n)
		}
	}
	return out
}

// Bytes formats n bytes as a binary quantity ("12Gi", "1536Mi", "0").
func Bytes(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}

// String is the usage in quota terms, for logs.
func (u Usage) String() string {
	var b strings.Builder
	b.WriteString("vcpus=")
	b.WriteString(strconv.FormatInt(u.VCPUs, 10))
	b.WriteString(" memory=" + Bytes(u.Memory) + " vms=" + strconv.FormatInt(u.VMs, 10) + " images=" + strconv.FormatInt(u.Images, 10))
	for _, class := range slices.Sorted(maps.Keys(u.Storage)) {
		b.WriteString(" persistent_storage[" + class + "]=" + Bytes(u.Storage[class]))
	}
	return b.String()
}

// NonNegative is u with every negative amount at zero.
func (u Usage) NonNegative() Usage {
	out := Usage{VCPUs: max(u.VCPUs, 0), Memory: max(u.Memory, 0), VMs: max(u.VMs, 0), Images: max(u.Images, 0)}
	for class, n := range u.Storage {
		if n > 0 {
			out.addStorage(class, n)
		}
	}
	return out
}
