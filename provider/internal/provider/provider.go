// Package provider is the virtplane Terraform provider. Resources and data
// sources arrive with the provider issue; this holds its configuration.
package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

var _ provider.Provider = (*virtplaneProvider)(nil)

type virtplaneProvider struct {
	version string
}

type providerModel struct {
	Endpoint  types.String `tfsdk:"endpoint"`
	Token     types.String `tfsdk:"token"`
	TokenFile types.String `tfsdk:"token_file"`
	CAFile    types.String `tfsdk:"ca_file"`
}

// New returns the provider factory.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &virtplaneProvider{version: version} }
}

func (p *virtplaneProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "virtplane"
	resp.Version = p.version
}

func (p *virtplaneProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	resp.Schema = schema.Schema{
		Description: "Manages virtual machines on virtplane agents: KubeVirt's VM lifecycle without Kubernetes.",
		Attributes: map[string]schema.Attribute{
			"endpoint": schema.StringAttribute{
				Optional:    true,
				Description: "Agent API endpoint: `unix:///run/virtplane/agent.sock` (default) or `host:port` for TLS. Env `VIRTPLANE_ENDPOINT`.",
			},
			"token": schema.StringAttribute{
				Optional:    true,
				Sensitive:   true,
				Description: "Bearer token for a TLS endpoint. Env `VIRTPLANE_TOKEN`.",
			},
			"token_file": schema.StringAttribute{
				Optional:    true,
				Description: "File holding the bearer token. Env `VIRTPLANE_TOKEN_FILE`.",
			},
			"ca_file": schema.StringAttribute{
				Optional:    true,
				Description: "CA certificate that signed the agent's TLS certificate. Env `VIRTPLANE_CA_FILE`.",
			},
		},
	}
}

func (p *virtplaneProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var m providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
}

func (p *virtplaneProvider) Resources(context.Context) []func() resource.Resource { return nil }

func (p *virtplaneProvider) DataSources(context.Context) []func() datasource.DataSource { return nil }
