package provider

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The conversions between the virtplane_storage_class model and the
// StorageClass API object: metadata.name, the spec's one kind and node
// selector, and what the status says (key_set, the Ready condition).

// storageClassFromModel builds the class the configuration asks for. All
// values must be known (apply time).
func storageClassFromModel(ctx context.Context, m *storageClassModel) (*apiv1.StorageClass, diag.Diagnostics) {
	var diags diag.Diagnostics
	sc := &apiv1.StorageClass{
		Metadata: &apiv1.ObjectMeta{Name: m.Name.ValueString()},
		Spec:     &apiv1.StorageClassSpec{NodeSelector: stringMap(ctx, m.NodeSelector, &diags)},
	}
	if r := m.RBD; r != nil {
		var mons []string
		if !r.Monitors.IsNull() && !r.Monitors.IsUnknown() {
			diags.Append(r.Monitors.ElementsAs(ctx, &mons, false)...)
		}
		sc.Spec.Rbd = &apiv1.RBDStorage{Monitors: mons, Pool: r.Pool.ValueString(), User: r.User.ValueString(), Key: cephxKey(r.Key)}
	}
	if s := m.SharedFilesystem; s != nil {
		sc.Spec.SharedFilesystem = &apiv1.SharedFilesystemStorage{Path: s.Path.ValueString()}
	}
	return sc, diags
}

// cephxKey is the key a configuration gives, without the spaces around it
// (file("x.key") keeps the file's newline), which no key has.
func cephxKey(v types.String) string {
	return strings.TrimSpace(v.ValueString())
}

// storageClassToModel renders sc as the resource's model. prior (the plan
// or the previous state; nil for data sources and imports) gives the key,
// which no read returns, and the user's empty node selector map.
func storageClassToModel(sc *apiv1.StorageClass, prior *storageClassModel) (storageClassModel, diag.Diagnostics) {
	var diags diag.Diagnostics
	meta, spec, st := sc.GetMetadata(), sc.GetSpec(), sc.GetStatus()
	priorSelector := types.MapNull(types.StringType)
	if prior != nil {
		priorSelector = prior.NodeSelector
	}
	m := storageClassModel{
		ID:           types.StringValue(meta.GetName()),
		Name:         types.StringValue(meta.GetName()),
		NodeSelector: mapFromAPI(spec.GetNodeSelector(), priorSelector, false, &diags),
		UID:          types.StringValue(meta.GetUid()),
		KeySet:       types.BoolValue(st.GetKeySet()),
		Ready:        types.BoolValue(false),
		Message:      types.StringNull(),
	}
	for _, c := range st.GetConditions() {
		if c.GetType() == "Ready" {
			m.Ready, m.Message = types.BoolValue(c.GetStatus() == "True"), optString(c.GetMessage())
		}
	}
	if r := spec.GetRbd(); r != nil {
		key := types.StringNull()
		if prior != nil && prior.RBD != nil {
			key = prior.RBD.Key
		}
		m.RBD = &rbdModel{Monitors: stringList(r.GetMonitors(), &diags), Pool: types.StringValue(r.GetPool()),
			User: types.StringValue(r.GetUser()), Key: key}
	}
	if s := spec.GetSharedFilesystem(); s != nil {
		m.SharedFilesystem = &sharedFilesystemModel{Path: types.StringValue(s.GetPath())}
	}
	return m, diags
}

// storageClassDataFromModel is m as the data source has it: no key, and
// an empty map rather than null for no node selector.
func storageClassDataFromModel(m storageClassModel, diags *diag.Diagnostics) storageClassDataModel {
	out := storageClassDataModel{ID: m.ID, Name: m.Name, SharedFilesystem: m.SharedFilesystem, NodeSelector: m.NodeSelector,
		UID: m.UID, KeySet: m.KeySet, Ready: m.Ready, Message: m.Message}
	if m.NodeSelector.IsNull() {
		out.NodeSelector = mapFromAPI(nil, m.NodeSelector, true, diags)
	}
	if r := m.RBD; r != nil {
		out.RBD = &rbdDataModel{Monitors: r.Monitors, Pool: r.Pool, User: r.User}
	}
	return out
}

// mergeStorageClass applies the configuration's spec (want) onto the
// stored class (cur), keeping what Terraform does not manage (labels,
// annotations). An empty rbd key keeps the stored one.
func mergeStorageClass(cur, want *apiv1.StorageClass) *apiv1.StorageClass {
	next := proto.Clone(cur).(*apiv1.StorageClass)
	next.Spec = proto.Clone(want.GetSpec()).(*apiv1.StorageClassSpec)
	return next
}
