package provider

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func i64p(n int64) *int64 { return &n }

// A quota and allow-lists go to the agent as configured: an unset bound
// or list is absent, an empty list present (nothing allowed); they come
// back in the configuration's spelling, with the usage.
func TestNamespaceConversions(t *testing.T) {
	ctx := context.Background()
	var diags diag.Diagnostics
	plan := namespaceModel{
		Name: types.StringValue("team-a"),
		Quota: &namespaceQuotaModel{VCPUs: types.Int64Value(16), Memory: quantityOf("65536Mi"), VMs: types.Int64Null(), Images: types.Int64Value(0),
			PersistentStorage: mapFromAPI(map[string]string{"ceph": "512000Mi"}, types.MapNull(types.StringType), false, &diags)},
		Allowed: &namespaceAllowedModel{Bridges: stringList([]string{"br0"}, &diags), Networks: stringList(nil, &diags),
			StorageClasses: types.ListNull(types.StringType), PortForwardRanges: types.ListNull(types.StringType)},
	}
	ns, d := namespaceFromModel(ctx, &plan)
	diags.Append(d...)
	want := &apiv1.Namespace{Metadata: &apiv1.ObjectMeta{Name: "team-a"}, Spec: &apiv1.NamespaceSpec{
		Quota:   &apiv1.NamespaceQuota{Vcpus: i64p(16), Memory: proto.String("65536Mi"), Images: i64p(0), PersistentStorage: map[string]string{"ceph": "512000Mi"}},
		Allowed: &apiv1.NamespaceAllowed{Bridges: &apiv1.StringList{Items: []string{"br0"}}, Networks: &apiv1.StringList{Items: []string{}}},
	}}
	if !proto.Equal(ns, want) {
		t.Errorf("namespaceFromModel:\n%v\nwant\n%v", ns, want)
	}

	// The agent answers in canonical spellings, with the usage.
	stored := proto.Clone(want).(*apiv1.Namespace)
	stored.Metadata.Uid = "u1"
	stored.Spec.Quota.Memory = proto.String("64Gi")
	stored.Spec.Quota.PersistentStorage["ceph"] = "500Gi"
	stored.Status = &apiv1.NamespaceStatus{Used: &apiv1.NamespaceUsage{Vcpus: 14, Memory: "28Gi", Vms: 7, PersistentStorage: map[string]string{"ceph": "120Gi"}}}
	m, d := namespaceToModel(stored, &plan)
	diags.Append(d...)
	if m.Quota.Memory.ValueString() != "65536Mi" || m.Quota.VMs.IsNull() != true || m.Quota.Images.ValueInt64() != 0 {
		t.Errorf("quota read back as %+v", m.Quota)
	}
	var storage map[string]string
	diags.Append(m.Quota.PersistentStorage.ElementsAs(ctx, &storage, false)...)
	if storage["ceph"] != "512000Mi" {
		t.Errorf("persistent_storage read back as %v, want the configuration's spelling", storage)
	}
	if m.Allowed.Networks.IsNull() || len(m.Allowed.Networks.Elements()) != 0 || !m.Allowed.StorageClasses.IsNull() {
		t.Errorf("allowed read back as %+v", m.Allowed)
	}
	used := m.Used.Attributes()
	if used["vcpus"].(types.Int64).ValueInt64() != 14 || used["memory"].(types.String).ValueString() != "28Gi" || used["images"].(types.Int64).ValueInt64() != 0 {
		t.Errorf("used = %v", used)
	}

	// Imported (no prior blocks): an agent's empty spec reads as no
	// blocks, a set one as blocks.
	m, d = namespaceToModel(&apiv1.Namespace{Metadata: &apiv1.ObjectMeta{Name: "b"}, Spec: &apiv1.NamespaceSpec{Quota: &apiv1.NamespaceQuota{}}}, nil)
	diags.Append(d...)
	if m.Quota != nil || m.Allowed != nil || m.Used.IsNull() {
		t.Errorf("an empty namespace read as %+v", m)
	}
	// A configured empty block stays when the agent drops it.
	m, d = namespaceToModel(&apiv1.Namespace{Metadata: &apiv1.ObjectMeta{Name: "b"}},
		&namespaceModel{Quota: &namespaceQuotaModel{PersistentStorage: types.MapNull(types.StringType)}, Allowed: &namespaceAllowedModel{}})
	diags.Append(d...)
	if m.Quota == nil || m.Allowed == nil || !m.Allowed.Bridges.IsNull() {
		t.Errorf("empty blocks read as %+v", m)
	}
	if diags.HasError() {
		t.Fatal(diags)
	}
}

// A token leaves the state when the agent no longer takes it.
func TestTokenGone(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	cred := func(revoked bool, expires time.Time) *apiv1.Credential {
		return &apiv1.Credential{Spec: &apiv1.CredentialSpec{Revoked: revoked, Expires: timestamppb.New(expires)}}
	}
	for _, tt := range []struct {
		cred *apiv1.Credential
		want string
	}{
		{cred(false, now.Add(time.Hour)), ""},
		{cred(true, now.Add(time.Hour)), "revoked"},
		{cred(false, now), "expired"},
		{&apiv1.Credential{Spec: &apiv1.CredentialSpec{}}, ""},
	} {
		if got := tokenGone(tt.cred, now); got != tt.want {
			t.Errorf("tokenGone(%v) = %q, want %q", tt.cred, got, tt.want)
		}
	}
}

func TestTTLValidator(t *testing.T) {
	for s, ok := range map[string]bool{"720h": true, "1s": true, "17520h": true, "17521h": false, "0s": false, "-1h": false, "30d": false} {
		var diags diag.Diagnostics
		ttlValidator().(stringCheck).check(path.Root("ttl"), s, &diags)
		if diags.HasError() == ok {
			t.Errorf("ttl %q: errors %v, want ok %v", s, diags, ok)
		}
	}
}

// Each tenancy kind's refusals land on the attribute they are about.
func TestTenancyAttributePaths(t *testing.T) {
	for _, tt := range []struct {
		fn   func(string) (path.Path, bool)
		in   string
		want path.Path
	}{
		{namespaceAttributePath, "spec.quota.memory", path.Root("quota").AtName("memory")},
		{namespaceAttributePath, "spec.allowed.port_forward_ranges.items[1]", path.Root("allowed").AtName("port_forward_ranges")},
		{namespaceAttributePath, "metadata.name", path.Root("name")},
		{metadataAttributePath, "spec.role", path.Root("role")},
		{tokenAttributePath, "ttl_seconds", path.Root("ttl")},
	} {
		if got, ok := tt.fn(tt.in); !ok || !got.Equal(tt.want) {
			t.Errorf("%s -> %v, %v; want %v", tt.in, got, ok, tt.want)
		}
	}
}

// The namespace's quantities and port ranges are checked at plan time,
// on the attribute at fault.
func TestNamespaceValidators(t *testing.T) {
	var diags diag.Diagnostics
	m, d := types.MapValue(types.StringType, map[string]attr.Value{"ceph": types.StringValue("500Gi"), "": types.StringValue("100GB")})
	diags.Append(d...)
	quantityMapValidator().(mapCheck).check(path.Root("quota").AtName("persistent_storage"), m.Elements(), &diags)
	if diags.ErrorsCount() != 1 || !diags[0].(diag.DiagnosticWithPath).Path().Equal(path.Root("quota").AtName("persistent_storage").AtMapKey("")) {
		t.Errorf("quantities: %v", diags)
	}
	for s, ok := range map[string]bool{"8080": true, "20000-20999": true, "0": false, "20999-20000": false, "http": false, "1-65536": false} {
		var diags diag.Diagnostics
		portRangeValidator().(stringCheck).check(path.Root("r"), s, &diags)
		if diags.HasError() == ok {
			t.Errorf("port range %q: %v, want ok %v", s, diags, ok)
		}
	}
}
