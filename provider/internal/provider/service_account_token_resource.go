package provider

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The virtplane_service_account_token resource: one bearer token of a
// service account. The token exists only in the answer to IssueToken (the
// agent keeps its SHA-256), so it is set once, at create, and everything
// else replaces the resource: a new token. A token revoked or expired
// outside Terraform is gone from the state at the next refresh, so that
// the next apply issues a new one.

var (
	_ resource.Resource              = (*serviceAccountTokenResource)(nil)
	_ resource.ResourceWithConfigure = (*serviceAccountTokenResource)(nil)
)

var serviceAccountTokenKind = objectKind{noun: "service account token", title: "Service account token", one: "a token",
	short: "token", logKey: "credential", importID: "(none: a token cannot be read back)", attribute: tokenAttributePath}

// maxTokenTTL is the API's bound on a token's validity (IssueTokenRequest).
const maxTokenTTL = 2 * 365 * 24 * time.Hour

// NewServiceAccountTokenResource returns the virtplane_service_account_token resource.
func NewServiceAccountTokenResource() resource.Resource {
	return &serviceAccountTokenResource{configuredResource: configuredResource{kind: serviceAccountTokenKind}, now: time.Now}
}

type serviceAccountTokenResource struct {
	configuredResource
	// now tells an expired token; tests set it.
	now func() time.Time
}

type serviceAccountTokenModel struct {
	ID             types.String `tfsdk:"id"`
	Namespace      types.String `tfsdk:"namespace"`
	ServiceAccount types.String `tfsdk:"service_account"`
	TTL            types.String `tfsdk:"ttl"`
	Description    types.String `tfsdk:"description"`
	Token          types.String `tfsdk:"token"`
	Expires        types.String `tfsdk:"expires"`
}

func (r *serviceAccountTokenResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_service_account_token"
}

func (r *serviceAccountTokenResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A bearer token of a service account (docs/security.md), issued by the agent; a namespace's admins " +
			"issue its accounts' tokens. The token is shown only once, when issued, so it is set at create and kept in the " +
			"state (sensitive): protect the state as the token. Any change replaces the resource, which issues a new token " +
			"and revokes the old one. A token revoked or expired outside Terraform leaves the state at the next refresh, and " +
			"the next apply issues a new one. Destroying the resource revokes the token at once on every server (the agent " +
			"keeps the record until it expires, to say when and by whom). Not importable: no read returns a token.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, PlanModifiers: keep,
				MarkdownDescription: "The credential's name (`cred-...`), which `virtplane-agent auth token list` shows and `auth token revoke` takes."},
			"namespace": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(apiv1.DefaultNamespace),
				MarkdownDescription: "Namespace of the service account. Default `default`. Changing it issues a new token.",
				Validators:          []validator.String{dnsLabelValidator()}, PlanModifiers: replace},
			"service_account": schema.StringAttribute{Required: true, PlanModifiers: replace,
				MarkdownDescription: "Name of the service account (`virtplane_service_account.<name>.name`). Changing it issues a new token.",
				Validators:          []validator.String{dnsLabelValidator()}},
			"ttl": schema.StringAttribute{Optional: true, PlanModifiers: replace, Validators: []validator.String{ttlValidator()},
				MarkdownDescription: "How long the token is valid, a Go duration (`720h`); unset: the agent's default, 90 days; at most 2 years. Changing it issues a new token."},
			"description": schema.StringAttribute{Optional: true, PlanModifiers: replace,
				MarkdownDescription: "What the token is for, shown by `virtplane-agent auth token list`. Changing it issues a new token."},
			"token": schema.StringAttribute{Computed: true, Sensitive: true, PlanModifiers: keep,
				MarkdownDescription: "The token (`vpt_...`), for a provider block's `token` or `VIRTPLANE_TOKEN`. Set once, at create."},
			"expires": schema.StringAttribute{Computed: true, PlanModifiers: keep,
				MarkdownDescription: "When the token expires, RFC 3339 in UTC."},
		},
	}
}

// ttlValidator takes a positive Go duration of at most two years.
func ttlValidator() validator.String {
	return stringCheck{
		describedAs: "a Go duration such as 720h, at most 2 years",
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			d, err := time.ParseDuration(s)
			switch {
			case err != nil:
				diags.AddAttributeError(p, "Invalid ttl", fmt.Sprintf("ttl %s is not a duration such as 720h: %v", strconv.Quote(s), err))
			case d <= 0 || d > maxTokenTTL:
				diags.AddAttributeError(p, "Invalid ttl", fmt.Sprintf("ttl %s must be more than 0 and at most 2 years (17520h)", strconv.Quote(s)))
			}
		},
	}
}

func (r *serviceAccountTokenResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan serviceAccountTokenModel
	if resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...); resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "issue a token") {
		return
	}
	var ttl time.Duration
	if s := plan.TTL.ValueString(); s != "" {
		ttl, _ = time.ParseDuration(s) // the validator parsed it
	}
	account := apiv1.Ref(plan.Namespace.ValueString(), plan.ServiceAccount.ValueString())
	issued, err := r.data.client.Credentials.IssueToken(ctx, &apiv1.IssueTokenRequest{
		Subject:    &apiv1.Subject{Kind: apiv1.SubjectServiceAccount, Namespace: plan.Namespace.ValueString(), Name: plan.ServiceAccount.ValueString()},
		TtlSeconds: int64(ttl / time.Second), Description: plan.Description.ValueString(),
	})
	if err != nil {
		r.addError(&resp.Diagnostics, err, "issue a token of service account "+account)
		return
	}
	cred := issued.GetCredential()
	tflog.Info(ctx, "service account token issued", map[string]any{"credential": cred.GetMetadata().GetName(), "service_account": account})
	plan.ID = types.StringValue(cred.GetMetadata().GetName())
	plan.Token = types.StringValue(issued.GetToken())
	plan.Expires = optTime(cred.GetSpec().GetExpires())
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Read keeps the token while the agent still accepts it: a credential
// deleted, revoked or expired leaves the state.
func (r *serviceAccountTokenResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state serviceAccountTokenModel
	if resp.Diagnostics.Append(req.State.Get(ctx, &state)...); resp.Diagnostics.HasError() {
		return
	}
	name := state.ID.ValueString()
	if !r.readyToRefresh(req, resp, "read credential "+name) {
		return
	}
	cred, err := r.data.client.Credentials.Get(ctx, &apiv1.GetCredentialRequest{Name: name})
	if !r.stillManaged(ctx, resp, name, "", "", err) {
		return
	}
	if gone := tokenGone(cred, r.now()); gone != "" {
		tflog.Warn(ctx, "service account token "+gone+" outside Terraform; removing it from the state", map[string]any{"credential": name})
		resp.State.RemoveResource(ctx)
		return
	}
	state.Expires = optTime(cred.GetSpec().GetExpires())
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// tokenGone says why the agent no longer accepts cred ("revoked",
// "expired"), or "".
func tokenGone(cred *apiv1.Credential, now time.Time) string {
	switch exp := cred.GetSpec().GetExpires(); {
	case cred.GetSpec().GetRevoked():
		return "revoked"
	case exp != nil && !exp.AsTime().After(now):
		return "expired"
	}
	return ""
}

// Update has nothing to write: every attribute replaces the token.
func (r *serviceAccountTokenResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan serviceAccountTokenModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(resp.State.Set(ctx, &plan)...)
}

// Delete revokes the token; the agent keeps the record until it expires.
func (r *serviceAccountTokenResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state serviceAccountTokenModel
	if resp.Diagnostics.Append(req.State.Get(ctx, &state)...); resp.Diagnostics.HasError() || !r.ready(&resp.Diagnostics, "revoke a token") {
		return
	}
	name := state.ID.ValueString()
	_, err := r.data.client.Credentials.Revoke(ctx, &apiv1.RevokeCredentialRequest{Name: name})
	switch {
	case err == nil, status.Code(err) == codes.NotFound:
		tflog.Info(ctx, "service account token revoked", map[string]any{"credential": name})
	default:
		r.addError(&resp.Diagnostics, err, "revoke credential "+name)
	}
}

// tokenAttributePath maps an IssueToken refusal's fields to the
// attributes.
func tokenAttributePath(fieldPath string) (path.Path, bool) {
	switch norm, _ := normalizeFieldPath(fieldPath); norm {
	case "subject.name":
		return path.Root("service_account"), true
	case "subject.namespace":
		return path.Root("namespace"), true
	case "ttl_seconds":
		return path.Root("ttl"), true
	case "description":
		return path.Root("description"), true
	}
	return path.Empty(), false
}
