package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// The virtplane_namespace model and its conversions: the quota and the
// allowed lists are the spec (a cluster-admin's), used is the status (the
// server's, kept in the same etcd transaction as every write that
// changes it).

type namespaceModel struct {
	ID      types.String           `tfsdk:"id"`
	Name    types.String           `tfsdk:"name"`
	Quota   *namespaceQuotaModel   `tfsdk:"quota"`
	Allowed *namespaceAllowedModel `tfsdk:"allowed"`
	UID     types.String           `tfsdk:"uid"`
	Used    types.Object           `tfsdk:"used"`
}

// namespaceQuotaModel is the quota block; a null bound is unlimited.
type namespaceQuotaModel struct {
	VCPUs             types.Int64   `tfsdk:"vcpus"`
	Memory            quantityValue `tfsdk:"memory"`
	VMs               types.Int64   `tfsdk:"vms"`
	Images            types.Int64   `tfsdk:"images"`
	PersistentStorage types.Map     `tfsdk:"persistent_storage"`
}

// namespaceAllowedModel is the allowed block: a null list is whatever
// the host policy allows, an empty one nothing.
type namespaceAllowedModel struct {
	Bridges           types.List `tfsdk:"bridges"`
	Networks          types.List `tfsdk:"networks"`
	StorageClasses    types.List `tfsdk:"storage_classes"`
	PortForwardRanges types.List `tfsdk:"port_forward_ranges"`
}

// namespaceUsageAttrs are the attributes of used.
var namespaceUsageAttrs = map[string]attr.Type{
	"vcpus": types.Int64Type, "memory": types.StringType, "vms": types.Int64Type, "images": types.Int64Type,
	"persistent_storage": types.MapType{ElemType: types.StringType},
}

// namespaceDataModel is the data source's state: the resource's, every
// attribute read.
type namespaceDataModel = namespaceModel

// namespaceFromModel is the Namespace the plan asks for.
func namespaceFromModel(ctx context.Context, m *namespaceModel) (*apiv1.Namespace, diag.Diagnostics) {
	var diags diag.Diagnostics
	ns := &apiv1.Namespace{Metadata: &apiv1.ObjectMeta{Name: m.Name.ValueString()}, Spec: &apiv1.NamespaceSpec{}}
	if q := m.Quota; q != nil {
		ns.Spec.Quota = &apiv1.NamespaceQuota{
			Vcpus: optInt64(q.VCPUs), Vms: optInt64(q.VMs), Images: optInt64(q.Images),
			PersistentStorage: stringMap(ctx, q.PersistentStorage, &diags),
		}
		if !q.Memory.IsNull() && !q.Memory.IsUnknown() {
			v := q.Memory.ValueString()
			ns.Spec.Quota.Memory = &v
		}
	}
	if a := m.Allowed; a != nil {
		ns.Spec.Allowed = &apiv1.NamespaceAllowed{
			Bridges: allowList(ctx, a.Bridges, &diags), Networks: allowList(ctx, a.Networks, &diags),
			StorageClasses: allowList(ctx, a.StorageClasses, &diags), PortForwardRanges: allowList(ctx, a.PortForwardRanges, &diags),
		}
	}
	return ns, diags
}

// namespaceToModel is ns as state, with the spellings of prior (the plan
// or the previous state; nil for a data source or an import) where the
// agent's mean the same.
func namespaceToModel(ns *apiv1.Namespace, prior *namespaceModel) (namespaceModel, diag.Diagnostics) {
	var diags diag.Diagnostics
	name := ns.GetMetadata().GetName()
	m := namespaceModel{ID: types.StringValue(name), Name: types.StringValue(name), UID: types.StringValue(ns.GetMetadata().GetUid())}
	var pq *namespaceQuotaModel
	var pa *namespaceAllowedModel
	if prior != nil {
		pq, pa = prior.Quota, prior.Allowed
	}
	// A block the configuration leaves out stays out when the agent's
	// spec is empty too, and an empty block stays: an empty quota is no
	// quota, whether the agent keeps it or not.
	q, a := ns.GetSpec().GetQuota(), ns.GetSpec().GetAllowed()
	if q == nil && pq != nil {
		q = &apiv1.NamespaceQuota{}
	}
	if a == nil && pa != nil {
		a = &apiv1.NamespaceAllowed{}
	}
	if q != nil && (pq != nil || !isEmptyQuota(q)) {
		if pq == nil {
			pq = &namespaceQuotaModel{PersistentStorage: types.MapNull(types.StringType)}
		}
		m.Quota = &namespaceQuotaModel{
			VCPUs: int64Of(q.Vcpus), VMs: int64Of(q.Vms), Images: int64Of(q.Images),
			Memory:            quantityNull(),
			PersistentStorage: mapFromAPI(sameQuantities(q.GetPersistentStorage(), stringMap(context.Background(), pq.PersistentStorage, &diags)), pq.PersistentStorage, false, &diags),
		}
		if q.Memory != nil {
			m.Quota.Memory = quantityOf(*q.Memory)
			if !pq.Memory.IsNull() && !pq.Memory.IsUnknown() && validation.EqualQuantities(pq.Memory.ValueString(), *q.Memory) {
				m.Quota.Memory = pq.Memory
			}
		}
	}
	if a != nil && (pa != nil || !isEmptyAllowed(a)) {
		m.Allowed = &namespaceAllowedModel{
			Bridges: listOf(a.GetBridges(), &diags), Networks: listOf(a.GetNetworks(), &diags),
			StorageClasses: listOf(a.GetStorageClasses(), &diags), PortForwardRanges: listOf(a.GetPortForwardRanges(), &diags),
		}
	}
	u := ns.GetStatus().GetUsed()
	storage := u.GetPersistentStorage()
	if storage == nil {
		storage = map[string]string{}
	}
	memory := u.GetMemory()
	if memory == "" {
		memory = "0"
	}
	sv, d := types.MapValueFrom(context.Background(), types.StringType, storage)
	diags.Append(d...)
	used, d := types.ObjectValue(namespaceUsageAttrs, map[string]attr.Value{
		"vcpus": types.Int64Value(u.GetVcpus()), "memory": types.StringValue(memory), "vms": types.Int64Value(u.GetVms()),
		"images": types.Int64Value(u.GetImages()), "persistent_storage": sv,
	})
	diags.Append(d...)
	m.Used = used
	return m, diags
}

func isEmptyQuota(q *apiv1.NamespaceQuota) bool {
	return q.Vcpus == nil && q.Memory == nil && q.Vms == nil && q.Images == nil && len(q.GetPersistentStorage()) == 0
}

func isEmptyAllowed(a *apiv1.NamespaceAllowed) bool {
	return a.Bridges == nil && a.Networks == nil && a.StorageClasses == nil && a.PortForwardRanges == nil
}

// sameQuantities is got with the spellings of prior where they mean the
// same quantity (the agent may answer "1Gi" for "1024Mi").
func sameQuantities(got, prior map[string]string) map[string]string {
	if len(got) == 0 {
		return got
	}
	out := make(map[string]string, len(got))
	for k, v := range got {
		if p, ok := prior[k]; ok && validation.EqualQuantities(p, v) {
			v = p
		}
		out[k] = v
	}
	return out
}

func optInt64(v types.Int64) *int64 {
	if v.IsNull() || v.IsUnknown() {
		return nil
	}
	n := v.ValueInt64()
	return &n
}

func int64Of(n *int64) types.Int64 {
	if n == nil {
		return types.Int64Null()
	}
	return types.Int64Value(*n)
}

func quantityNull() quantityValue { return quantityValue{StringValue: types.StringNull()} }

// allowList is a list attribute as an allow-list: null is no restriction
// (nil), empty allows nothing.
func allowList(ctx context.Context, l types.List, diags *diag.Diagnostics) *apiv1.StringList {
	if l.IsNull() || l.IsUnknown() {
		return nil
	}
	items := []string{}
	diags.Append(l.ElementsAs(ctx, &items, false)...)
	return &apiv1.StringList{Items: items}
}

// listOf is an allow-list as a list attribute: null when absent.
func listOf(l *apiv1.StringList, diags *diag.Diagnostics) types.List {
	if l == nil {
		return types.ListNull(types.StringType)
	}
	return stringList(l.GetItems(), diags)
}
