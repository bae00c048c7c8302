package nsquota

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Exceeded is one bound of a quota that a write would go beyond.
type Exceeded struct {
	// Resource is the quota's field: "vcpus", "memory", "vms", "images",
	// or "persistent_storage[<class>]".
	Resource string
	// Requested, Used and Limited are in the resource's units, formatted
	// as the API shows them ("4", "2Gi").
	Requested, Used, Limited string
}

func (e Exceeded) String() string {
	return fmt.Sprintf("%s: requested %s, used %s, limited %s", e.Resource, e.Requested, e.Used, e.Limited)
}

// Check reports each bound of quota that used+delta goes beyond, among
// the resources delta increases: a decrease always passes, and a quota
// lowered below what is used refuses only further increases, as
// Kubernetes' ResourceQuota does. Unset bounds are unlimited; malformed
// ones (validation refuses them) are too.
func Check(quota *apiv1.NamespaceQuota, used, delta Usage) []Exceeded {
	if quota == nil {
		return nil
	}
	var out []Exceeded
	count := func(name string, limit *int64, used, delta int64) {
		if limit != nil && delta > 0 && used+delta > *limit {
			out = append(out, Exceeded{name, strconv.FormatInt(delta, 10), strconv.FormatInt(used, 10), strconv.FormatInt(*limit, 10)})
		}
	}
	bytes := func(name, limit string, used, delta int64) {
		if delta <= 0 {
			return
		}
		q, err := resource.ParseQuantity(limit)
		if err != nil {
			return
		}
		if used+delta > q.Value() {
			out = append(out, Exceeded{name, Bytes(delta), Bytes(used), limit})
		}
	}
	count("vcpus", quota.Vcpus, used.VCPUs, delta.VCPUs)
	if quota.Memory != nil {
		bytes("memory", quota.GetMemory(), used.Memory, delta.Memory)
	}
	count("vms", quota.Vms, used.VMs, delta.VMs)
	for _, class := range slices.Sorted(maps.Keys(quota.GetPersistentStorage())) {
		// "local" bounds the node's disk as "" does.
		key := StorageClassKey(class)
		bytes("persistent_storage["+strconv.Quote(class)+"]", quota.GetPersistentStorage()[class], used.Storage[key], delta.Storage[key])
	}
	count("images", quota.Images, used.Images, delta.Images)
	return out
}

// Message is the refusal of a write that would exceed quota in
// namespace, in Kubernetes' words: "namespace a: exceeded quota: vcpus:
// requested 4, used 14, limited 16; vms: requested 1, used 5, limited 5".
func Message(namespace string, exceeded []Exceeded) string {
	parts := make([]string, len(exceeded))
	for i, e := range exceeded {
		parts[i] = e.String()
	}
	return fmt.Sprintf("namespace %s: exceeded quota: %s", namespace, strings.Join(parts, "; "))
}
