package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The virtplane_backups data source: what a backup target holds, as the
// server reads it from the target's manifests (BackupTargets.ListManifests):
// also backups another cluster wrote.

var (
	_ datasource.DataSource              = (*backupsDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*backupsDataSource)(nil)
)

// NewBackupsDataSource returns the virtplane_backups data source.
func NewBackupsDataSource() datasource.DataSource { return &backupsDataSource{} }

type backupsDataSource struct {
	configuredDataSource
}

type backupsDataModel struct {
	ID             types.String      `tfsdk:"id"`
	Target         types.String      `tfsdk:"target"`
	VirtualMachine types.String      `tfsdk:"virtual_machine"`
	Backups        []backupDataModel `tfsdk:"backups"`
}

type backupDataModel struct {
	ID          types.String `tfsdk:"id"`
	Cluster     types.String `tfsdk:"cluster"`
	VMNamespace types.String `tfsdk:"vm_namespace"`
	VMName      types.String `tfsdk:"vm_name"`
	VMUID       types.String `tfsdk:"vm_uid"`
	Created     types.String `tfsdk:"created"`
	SizeBytes   types.Int64  `tfsdk:"size_bytes"`
	DataBytes   types.Int64  `tfsdk:"data_bytes"`
	Volumes     types.Int64  `tfsdk:"volumes"`
}

func (d *backupsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_backups"
}

func (d *backupsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
	}
	num := func(desc string) schema.Int64Attribute {
		return schema.Int64Attribute{Computed: true, MarkdownDescription: desc}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Lists the backups a backup target holds, newest first, as the server reads them from the " +
			"target's manifests: also those another virtplane cluster wrote to the same place, and those whose backup " +
			"object was deleted with `deletion_policy = Retain`. An `id` is what a restore names " +
			"(`virtplane-agent backup restore ID --target T --to NEWVM`).",
		Attributes: map[string]schema.Attribute{
			"id": str("The target's name."),
			"target": schema.StringAttribute{Required: true, MarkdownDescription: "Name of the backup target.",
				Validators: []validator.String{backupTargetFieldValidator("metadata.name")}},
			"virtual_machine": schema.StringAttribute{Optional: true, MarkdownDescription: "Only the backups of VMs of this name.",
				Validators: []validator.String{dnsLabelValidator()}},
			"backups": schema.ListNestedAttribute{
				Computed: true, MarkdownDescription: "The backups, newest first.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"id":           str("The backup's id (a UUID)."),
					"cluster":      str("The label of the cluster that wrote it (`serve --cluster-name`)."),
					"vm_namespace": str("The backed up VM's namespace."),
					"vm_name":      str("The backed up VM's name."),
					"vm_uid":       str("The backed up VM's uid."),
					"created":      str("When the backup was taken (RFC 3339, UTC)."),
					"size_bytes":   num("The volumes' sizes, summed."),
					"data_bytes":   num("The bytes of data the volumes hold (what a restore writes)."),
					"volumes":      num("How many volumes the backup has."),
				}},
			},
		},
	}
}

func (d *backupsDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var cfg backupsDataModel
	if !d.readConfig(ctx, req, resp, &cfg, "read virtplane_backups") {
		return
	}
	target := cfg.Target.ValueString()
	list, err := d.data.client.BackupTargets.ListManifests(ctx, &apiv1.ListBackupManifestsRequest{Name: target, VmName: cfg.VirtualMachine.ValueString()})
	if err != nil {
		addLookupError(&resp.Diagnostics, err, d.data.endpoint, backupTargetKind, target, "(virtplane-agent get backuptargets lists them).")
		return
	}
	out := backupsDataModel{ID: types.StringValue(target), Target: cfg.Target, VirtualMachine: cfg.VirtualMachine, Backups: []backupDataModel{}}
	for _, m := range list.GetItems() {
		out.Backups = append(out.Backups, backupDataModel{
			ID: types.StringValue(m.GetId()), Cluster: types.StringValue(m.GetCluster()),
			VMNamespace: types.StringValue(m.GetVmNamespace()), VMName: types.StringValue(m.GetVmName()), VMUID: types.StringValue(m.GetVmUid()),
			Created:   types.StringValue(m.GetCreated().AsTime().UTC().Format(time.RFC3339)),
			SizeBytes: types.Int64Value(m.GetSizeBytes()), DataBytes: types.Int64Value(m.GetDataBytes()), Volumes: types.Int64Value(int64(m.GetVolumes())),
		})
	}
	d.record(ctx, resp, &out, nil)
}
