package provider

import (
	"context"
	"os"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

var _ provider.Provider = (*virtplaneProvider)(nil)

type virtplaneProvider struct {
	version string
	// getenv is os.Getenv; tests replace it.
	getenv func(string) string
}

type providerModel struct {
	Endpoint  types.String `tfsdk:"endpoint"`
	Endpoints types.List   `tfsdk:"endpoints"`
	Token     types.String `tfsdk:"token"`
	TokenFile types.String `tfsdk:"token_file"`
	CAFile    types.String `tfsdk:"ca_file"`
	// ClientCertFile and ClientKeyFile: a user's or service account's
	// client certificate (virtplane-agent auth cert issue) instead of a
	// token.
	ClientCertFile types.String `tfsdk:"client_cert_file"`
	ClientKeyFile  types.String `tfsdk:"client_key_file"`
}

// New returns the provider factory.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &virtplaneProvider{version: version, getenv: os.Getenv} }
}

func (p *virtplaneProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "virtplane"
	resp.Version = p.version
}

func (p *virtplaneProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Manages virtual machines on virtplane agents: KubeVirt's VM lifecycle without Kubernetes. " +
			"A value in the provider block wins over its environment variable, which wins over the default.",
		Attributes: map[string]schema.Attribute{
			"endpoint": schema.StringAttribute{
				Optional: true,
				Description: "Agent API endpoint: `unix:///run/virtplane/agent.sock` (the default), a bare socket path, " +
					"or `host:port` / `https://host:port` for the agent's TLS listener. Environment: `" + client.EnvEndpoint +
					"` (which may also list several servers, comma-separated). Conflicts with `endpoints`.",
				Validators: []validator.String{endpointValidator()},
			},
			"endpoints": schema.ListAttribute{
				ElementType: types.StringType,
				Optional:    true,
				Description: "The servers of one control plane, each `host:port` or `https://host:port`: the provider " +
					"spreads calls over the servers that answer, leaves out one that does not, and retries a refused read on the next. Conflicts with `endpoint`.",
				Validators: []validator.List{
					listvalidator.SizeAtLeast(1),
					listvalidator.ConflictsWith(path.MatchRoot("endpoint")),
					listvalidator.ValueStringsAre(endpointValidator()),
				},
			},
			"token": schema.StringAttribute{
				Optional:  true,
				Sensitive: true,
				Description: "Bearer token for a TLS endpoint (the agent writes it to `<data-dir>/pki/token`). " +
					"Not sent over a unix socket. Conflicts with `token_file`. Environment: `" + client.EnvToken + "`.",
				Validators: []validator.String{stringvalidator.ConflictsWith(path.MatchRoot("token_file"))},
			},
			"token_file": schema.StringAttribute{
				Optional: true,
				Description: "File holding the bearer token; keeps the token out of the configuration and state. " +
					"Setting `token` or `token_file` here ignores both token environment variables. " +
					"Environment: `" + client.EnvTokenFile + "`.",
			},
			"client_cert_file": schema.StringAttribute{
				Optional: true,
				Description: "PEM client certificate of a user or service account, signed by the agent CA " +
					"(`virtplane-agent auth cert issue` writes it as `client.crt`): the credential instead of a token, " +
					"which is then not sent. Requires `client_key_file`. Environment: `" + client.EnvClientCert + "`.",
				Validators: []validator.String{stringvalidator.AlsoRequires(path.MatchRoot("client_key_file"))},
			},
			"client_key_file": schema.StringAttribute{
				Optional: true,
				Description: "The client certificate's private key (`client.key`). Requires `client_cert_file`. " +
					"Environment: `" + client.EnvClientKey + "`.",
				Validators: []validator.String{stringvalidator.AlsoRequires(path.MatchRoot("client_cert_file"))},
			},
			"ca_file": schema.StringAttribute{
				Optional: true,
				Description: "PEM CA bundle that signed the agent's TLS certificate (the agent writes it to " +
					"`<data-dir>/pki/ca.crt`); unset means the system roots. Environment: `" + client.EnvCAFile + "`.",
			},
		},
	}
}

func (p *virtplaneProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}

	// Values that depend on resources not yet created are unknown during
	// plan. Failing here would make such configurations unusable; instead
	// nothing is dialled and readers report it only if they are read before
	// apply.
	if unknown := unknownAttributes(m); len(unknown) > 0 {
		if req.ClientCapabilities.DeferralAllowed {
			resp.Deferred = &provider.Deferred{Reason: provider.DeferredReasonProviderConfigUnknown}
			return
		}
		p.setData(resp, &providerData{unknown: unknown})
		return
	}

	r := resolveConfig(m, p.getenv)
	tls, err := checkEndpoint(r.endpoint.value)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root(r.endpoint.attr), "Invalid virtplane endpoint",
			r.endpoint.describe()+" "+strconv.Quote(r.endpoint.value)+": "+err.Error())
		return
	}
	if tls {
		if r.caFile.value != "" {
			if err := checkCAFile(r.caFile.value); err != nil {
				resp.Diagnostics.AddAttributeError(path.Root("ca_file"), "Unusable ca_file",
					r.caFile.describe()+": "+err.Error())
			}
		}
		if r.clientCert.value != "" || r.clientKey.value != "" {
			if err := checkClientCertificate(r.clientCert.value, r.clientKey.value); err != nil {
				resp.Diagnostics.AddAttributeError(path.Root("client_cert_file"), "Unusable client certificate",
					r.clientCert.describe()+", "+r.clientKey.describe()+": "+err.Error())
			}
		} else if r.token.value == "" && r.tokenFile.value != "" {
			if err := checkTokenFile(r.tokenFile.value); err != nil {
				resp.Diagnostics.AddAttributeError(path.Root("token_file"), "Unusable token_file",
					r.tokenFile.describe()+": "+err.Error())
			}
		}
		if resp.Diagnostics.HasError() {
			return
		}
	} else {
		// Only warn about what the block itself says: environment variables
		// are often exported for other endpoints and are harmless here.
		for _, s := range []setting{r.token, r.tokenFile, r.caFile, r.clientCert, r.clientKey} {
			if s.from == fromConfig {
				resp.Diagnostics.AddAttributeWarning(path.Root(s.attr), s.attr+" is ignored for a unix socket endpoint",
					"The agent's unix socket is protected by file permissions and carries no token or TLS; "+
						s.attr+" only applies to a host:port endpoint.")
			}
		}
	}

	// Dial does not connect: an unreachable agent surfaces at the first
	// call, where the diagnostic can say what was being done.
	c, err := client.Dial(ctx, r.clientConfig())
	if err != nil {
		resp.Diagnostics.AddError("Cannot configure the virtplane client", err.Error())
		return
	}
	p.setData(resp, &providerData{client: c, endpoint: r.endpoint.value})
}

func (p *virtplaneProvider) setData(resp *provider.ConfigureResponse, d *providerData) {
	resp.DataSourceData = d
	resp.ResourceData = d
}

// unknownAttributes names the provider attributes whose values are not known
// yet.
func unknownAttributes(m providerModel) []string {
	var out []string
	for _, a := range []struct {
		name string
		v    types.String
	}{{"endpoint", m.Endpoint}, {"token", m.Token}, {"token_file", m.TokenFile}, {"ca_file", m.CAFile},
		{"client_cert_file", m.ClientCertFile}, {"client_key_file", m.ClientKeyFile}} {
		if a.v.IsUnknown() {
			out = append(out, a.name)
		}
	}
	if m.Endpoints.IsUnknown() {
		out = append(out, "endpoints")
	} else {
		for _, e := range m.Endpoints.Elements() {
			if e.IsUnknown() {
				out = append(out, "endpoints")
				break
			}
		}
	}
	return out
}

func (p *virtplaneProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{NewVMResource, NewImageResource, NewNodeMaintenanceResource, NewPoolResource, NewReplicaSetResource,
		NewSnapshotResource, NewRestoreResource, NewNodeLabelsResource, NewStorageClassResource,
		NewBackupTargetResource, NewBackupScheduleResource,
		NewNamespaceResource, NewUserResource, NewServiceAccountResource, NewServiceAccountTokenResource,
		NewRoleBindingResource, NewClusterRoleBindingResource}
}

func (p *virtplaneProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{NewNodesDataSource, NewVMDataSource, NewVMsDataSource, NewImageDataSource, NewMigrationsDataSource, NewPoolDataSource,
		NewReplicaSetDataSource, NewSnapshotDataSource, NewStorageClassDataSource,
		NewBackupsDataSource, NewNamespaceDataSource}
}
