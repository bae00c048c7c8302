package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// What the data sources and resources share: Configure keeps the
// provider's client, and each call first checks it can be used; the
// resources' create, update and read start and end alike.

// configuredDataSource is embedded by the data sources.
type configuredDataSource struct {
	data *providerData
}

func (d *configuredDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// readConfig loads the configuration into cfg (a pointer to the data
// source's model) and says whether Read can go on to the agent. With
// provider settings still unknown at plan time it defers the read where
// Terraform allows that, and otherwise says which settings are unknown;
// what is a verb phrase ("read virtplane_nodes").
func (d *configuredDataSource) readConfig(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse, cfg any, what string) bool {
	resp.Diagnostics.Append(req.Config.Get(ctx, cfg)...)
	switch {
	case resp.Diagnostics.HasError():
		return false
	case d.data == nil:
		resp.Diagnostics.AddError("virtplane provider not configured",
			"The data source was read before the provider was configured. This is a bug in the virtplane provider.")
		return false
	case len(d.data.unknown) > 0 && req.ClientCapabilities.DeferralAllowed:
		resp.Deferred = &datasource.Deferred{Reason: datasource.DeferredReasonProviderConfigUnknown}
		return false
	case len(d.data.unknown) > 0:
		resp.Diagnostics.AddError(notReadyError(d.data, what))
		return false
	}
	return true
}

// record sets the state to m (a pointer to the data source's model) as
// read, unless diags, from reading it, has errors.
func (d *configuredDataSource) record(ctx context.Context, resp *datasource.ReadResponse, m any, diags diag.Diagnostics) {
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, m)...)
}

// configuredResource is embedded by the resources; kind words their
// diagnostics.
type configuredResource struct {
	kind objectKind
	data *providerData
}

func (r *configuredResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// ready reports whether the client can be used, adding a diagnostic if
// not; what is a verb phrase ("create an image").
func (r *configuredResource) ready(diags *diag.Diagnostics, what string) bool {
	if r.data == nil {
		diags.AddError("virtplane provider not configured",
			"The resource was used before the provider was configured. This is a bug in the virtplane provider.")
		return false
	}
	if len(r.data.unknown) > 0 {
		diags.AddError(notReadyError(r.data, what))
		return false
	}
	return true
}

// readyToRefresh is ready for Read: with provider settings still unknown
// at plan time it defers the refresh where Terraform allows that.
func (r *configuredResource) readyToRefresh(req resource.ReadRequest, resp *resource.ReadResponse, what string) bool {
	if r.data != nil && len(r.data.unknown) > 0 && req.ClientCapabilities.DeferralAllowed {
		resp.Deferred = &resource.Deferred{Reason: resource.DeferredReasonProviderConfigUnknown}
		return false
	}
	return r.ready(&resp.Diagnostics, what)
}

// timeoutOf is a timeouts block's Create or Update: the time an operation
// may take, def when the block does not say.
type timeoutOf func(ctx context.Context, def time.Duration) (time.Duration, diag.Diagnostics)

// planned is what create and update start from: the API object the plan's
// model m asks for (convert makes it) and the operation's time limit
// (limit is plan.Timeouts.Create or .Update). ok is false when diags has
// errors.
func planned[M, T any](ctx context.Context, m *M, convert func(context.Context, *M) (T, diag.Diagnostics),
	limit timeoutOf, def time.Duration, diags *diag.Diagnostics,
) (want T, timeout time.Duration, ok bool) {
	timeout, d := limit(ctx, def)
	diags.Append(d...)
	want, d = convert(ctx, m)
	diags.Append(d...)
	return want, timeout, !diags.HasError()
}

// timeoutsBlock is the timeouts block opts describes, with description,
// which the library's block lacks (the docs show every block's).
func timeoutsBlock(ctx context.Context, description string, opts timeouts.Opts) schema.Block {
	tb := timeouts.Block(ctx, opts)
	if b, ok := tb.(schema.SingleNestedBlock); ok {
		b.Description = description
		return b
	}
	return tb
}

// stillManaged decides what Read does with the agent's answer about
// object id, which the state records with stateUID: err from the read,
// gotUID that of the object read. Only a definite NotFound drops it from
// the state; an unreachable agent is an error, never a reason to plan a
// second one. Another object of the same name means ours was deleted:
// adopting it would let this configuration change or destroy an object
// it never created, so the state drops ours with a warning. It reports
// whether Read goes on to record what it read.
func (r *configuredResource) stillManaged(ctx context.Context, resp *resource.ReadResponse, id, stateUID, gotUID string, err error) bool {
	k := r.kind
	switch {
	case status.Code(err) == codes.NotFound:
		tflog.Warn(ctx, k.noun+" deleted outside Terraform; removing it from the state", map[string]any{k.logKey: id})
		resp.State.RemoveResource(ctx)
		return false
	case err != nil:
		r.addError(&resp.Diagnostics, err, "read "+k.noun+" "+id)
		return false
	case stateUID != "" && stateUID != gotUID:
		resp.Diagnostics.AddWarning(k.title+" "+id+" was replaced outside Terraform",
			fmt.Sprintf("The %s Terraform created (uid %s) is gone and another %s of the same name (uid %s) exists. "+
				"Terraform stops tracking it; to manage the new one, import it: terraform import <address> %s",
				k.short, stateUID, k.short, gotUID, id))
		resp.State.RemoveResource(ctx)
		return false
	}
	return true
}

// defaultTimeout applies to create, update and delete when the timeouts
// block does not say otherwise. Long enough for a real guest to boot from
// a cold image cache; waits end early when the VM cannot get there.
const defaultTimeout = 10 * time.Minute

// stateSetter is what resp.State offers to setState.
type stateSetter interface {
	Set(ctx context.Context, val any) diag.Diagnostics
}

// providerDataFrom unpacks what Configure stored. nil means the provider is
// not configured yet (Terraform validates configurations before that).
func providerDataFrom(data any, diags *diag.Diagnostics) *providerData {
	if data == nil {
		return nil
	}
	d, ok := data.(*providerData)
	if !ok {
		diags.AddError("Unexpected provider data",
			fmt.Sprintf("Expected *providerData, got %T. This is a bug in the virtplane provider.", data))
		return nil
	}
	return d
}
