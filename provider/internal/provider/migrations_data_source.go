package provider

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The virtplane_migrations data source: the live migrations of a
// namespace, read only.

var (
	_ datasource.DataSource              = (*migrationsDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*migrationsDataSource)(nil)
)

// NewMigrationsDataSource returns the virtplane_migrations data source.
// Migrations are imperative (`virtplane-agent migrate`), so there is no
// resource: configurations read them to report or to wait on them.
func NewMigrationsDataSource() datasource.DataSource { return &migrationsDataSource{} }

type migrationsDataSource struct {
	configuredDataSource
}

type migrationsDataSourceModel struct {
	ID         types.String     `tfsdk:"id"`
	Namespace  types.String     `tfsdk:"namespace"`
	VM         types.String     `tfsdk:"vm"`
	Phase      types.String     `tfsdk:"phase"`
	Migrations []migrationModel `tfsdk:"migrations"`
}

type migrationModel struct {
	Name               types.String `tfsdk:"name"`
	Namespace          types.String `tfsdk:"namespace"`
	VM                 types.String `tfsdk:"vm"`
	Phase              types.String `tfsdk:"phase"`
	Reason             types.String `tfsdk:"reason"`
	Message            types.String `tfsdk:"message"`
	SourceNode         types.String `tfsdk:"source_node"`
	TargetNode         types.String `tfsdk:"target_node"`
	Method             types.String `tfsdk:"method"`
	Mode               types.String `tfsdk:"mode"`
	StartTime          types.String `tfsdk:"start_time"`
	EndTime            types.String `tfsdk:"end_time"`
	Completed          types.Bool   `tfsdk:"completed"`
	Failed             types.Bool   `tfsdk:"failed"`
	FailureReason      types.String `tfsdk:"failure_reason"`
	AbortStatus        types.String `tfsdk:"abort_status"`
	DataTotalBytes     types.Int64  `tfsdk:"data_total_bytes"`
	DataProcessedBytes types.Int64  `tfsdk:"data_processed_bytes"`
	DataRemainingBytes types.Int64  `tfsdk:"data_remaining_bytes"`
	DowntimeMs         types.Int64  `tfsdk:"downtime_ms"`
	ElapsedMs          types.Int64  `tfsdk:"elapsed_ms"`
}

// migrationPhases are the phases a migration passes through, in order.
var migrationPhases = []string{
	apiv1.MigrationPending, apiv1.MigrationScheduling, apiv1.MigrationScheduled, apiv1.MigrationPreparingTarget,
	apiv1.MigrationTargetReady, apiv1.MigrationRunning, apiv1.MigrationSucceeded, apiv1.MigrationFailed,
}

func (d *migrationsDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_migrations"
}

func (d *migrationsDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	str := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, Description: desc}
	}
	num := func(desc string) schema.Int64Attribute {
		return schema.Int64Attribute{Computed: true, Description: desc}
	}
	boolean := func(desc string) schema.BoolAttribute { return schema.BoolAttribute{Computed: true, Description: desc} }
	resp.Schema = schema.Schema{
		Description: "Lists the live migrations of virtual machines (KubeVirt's VirtualMachineInstanceMigrations) " +
			"in a namespace, optionally those of one VM or in one phase, with where each goes, how far it got " +
			"and why it waits or failed. Migrations are started with `virtplane-agent migrate VM` and canceled " +
			"with `virtplane-agent migrate cancel VM`; Terraform only reads them. One call to the agent.",
		Attributes: map[string]schema.Attribute{
			"id": str("The filters in canonical form (`namespace=...;vm=...;phase=...`)."),
			"namespace": schema.StringAttribute{
				Optional:    true,
				Computed:    true,
				Description: "Namespace of the migrations (and their VMs). Default `default`.",
				Validators:  []validator.String{dnsLabelValidator()},
			},
			"vm": schema.StringAttribute{
				Optional:    true,
				Description: "Only list the migrations of this VM (by the `" + apiv1.LabelMigrationVMIName + "` label every migration carries).",
				Validators:  []validator.String{dnsLabelValidator()},
			},
			"phase": schema.StringAttribute{
				Optional:    true,
				Description: "Only list migrations in this phase: `" + strings.Join(migrationPhases, "`, `") + "` (case-sensitive).",
				Validators:  []validator.String{oneOf(migrationPhases...)},
			},
			"migrations": schema.ListNestedAttribute{
				Computed: true,
				Description: "The matching migrations, oldest first (by creation time, then name). At most one per VM " +
					"has not ended; ended ones stay listed until deleted.",
				NestedObject: schema.NestedAttributeObject{Attributes: map[string]schema.Attribute{
					"name":      str("Name of the migration (`<vm>-migration-xxxxx` when made by `virtplane-agent migrate`)."),
					"namespace": str("Namespace."),
					"vm":        str("Name of the VM (and of its instance) being migrated."),
					"phase": str("`Pending`, `Scheduling` (looking for a target node), `Scheduled`, `PreparingTarget`, " +
						"`TargetReady`, `Running` (the transfer), `Succeeded` or `Failed`. `Pending` too before the " +
						"migration controller first saw it."),
					"reason": str("Why the migration waits or failed, machine-readable (`Unschedulable`, ...); null when " +
						"there is nothing to say."),
					"message": str("Why the migration waits or failed, for people (e.g. `0/1 nodes are available: 1 node(s) " +
						"were the source`); null when there is nothing to say."),
					"source_node": str("Node the VM leaves; null until the migration controller handed the migration to the nodes."),
					"target_node": str("Node the VM moves to; null until the migration controller chose it."),
					"method": str("`LiveMigration` (memory only) or `BlockMigration` (local disks copied with the memory); " +
						"null until the migration was handed to the nodes."),
					"mode":           str("`PreCopy`, `PostCopy` or `Paused` (the guest was suspended to converge); null until the transfer started."),
					"start_time":     str("When the transfer started, RFC 3339 in UTC; null before."),
					"end_time":       str("When the transfer ended, RFC 3339 in UTC; null before."),
					"completed":      boolean("Whether the transfer ended, successfully or not (`failed` says which)."),
					"failed":         boolean("Whether the transfer failed; the VM then stays on its source node."),
					"failure_reason": str("Why the transfer failed, as the source node reported it; null unless it failed."),
					"abort_status": str("`Aborting`, `Succeeded` or `Failed` once the migration was canceled while " +
						"its transfer ran; null otherwise."),
					"data_total_bytes": num("Bytes the transfer moves (memory plus copied disks), as libvirt estimates " +
						"them; null until the source reported progress."),
					"data_processed_bytes": num("Bytes sent so far (pages dirtied again are sent again, so this may " +
						"exceed the total); null until the source reported progress."),
					"data_remaining_bytes": num("Bytes still to send; null until the source reported progress."),
					"downtime_ms":          num("Guest downtime at the switch-over, in milliseconds, as QEMU measured it; null until reported."),
					"elapsed_ms":           num("Duration of libvirt's migration job, in milliseconds; null until the source reported progress."),
				}},
			},
		},
	}
}

func (d *migrationsDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	var m migrationsDataSourceModel
	if !d.readConfig(ctx, req, resp, &m, "read virtplane_migrations") {
		return
	}
	m.Namespace = types.StringValue(namespaceOrDefault(m.Namespace))
	opts := &apiv1.ListOptions{Namespace: m.Namespace.ValueString()}
	if vm := m.VM.ValueString(); vm != "" {
		opts.LabelSelector = apiv1.LabelMigrationVMIName + "=" + vm
	}
	out, err := d.data.client.Migrations.List(ctx, &apiv1.ListMigrationsRequest{Options: opts})
	if err != nil {
		resp.Diagnostics.AddError(apiError(err, d.data.endpoint, "list migrations in namespace "+m.Namespace.ValueString()))
		return
	}
	m.ID = types.StringValue(migrationsFilterID(m))
	m.Migrations = migrationModels(out.GetItems(), m.Phase.ValueString())
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}

// migrationsFilterID renders the filters canonically.
func migrationsFilterID(m migrationsDataSourceModel) string {
	parts := []string{"namespace=" + m.Namespace.ValueString()}
	if vm := m.VM.ValueString(); vm != "" {
		parts = append(parts, "vm="+vm)
	}
	if p := m.Phase.ValueString(); p != "" {
		parts = append(parts, "phase="+p)
	}
	return strings.Join(parts, ";")
}

// migrationModels maps migrations to the schema, keeps those in phase
// ("" keeps all) and sorts them oldest first.
func migrationModels(items []*apiv1.VirtualMachineInstanceMigration, phase string) []migrationModel {
	type entry struct {
		created time.Time
		m       migrationModel
	}
	var kept []entry
	for _, it := range items {
		mm := migrationToModel(it)
		if phase != "" && mm.Phase.ValueString() != phase {
			continue
		}
		kept = append(kept, entry{created: it.GetMetadata().GetCreationTimestamp().AsTime(), m: mm})
	}
	sort.SliceStable(kept, func(i, j int) bool {
		a, b := kept[i], kept[j]
		if !a.created.Equal(b.created) {
			return a.created.Before(b.created)
		}
		return a.m.Name.ValueString() < b.m.Name.ValueString()
	})
	out := make([]migrationModel, len(kept))
	for i, e := range kept {
		out[i] = e.m
	}
	return out
}

func migrationToModel(mig *apiv1.VirtualMachineInstanceMigration) migrationModel {
	md, st := mig.GetMetadata(), mig.GetStatus()
	ms := st.GetMigrationState()
	phase := st.GetPhase()
	if phase == "" {
		phase = apiv1.MigrationPending // not seen by the controller yet
	}
	target := st.GetTargetNode()
	if target == "" {
		target = ms.GetTargetNode()
	}
	m := migrationModel{
		Name:          types.StringValue(md.GetName()),
		Namespace:     types.StringValue(md.GetNamespace()),
		VM:            types.StringValue(mig.GetSpec().GetVmiName()),
		Phase:         types.StringValue(phase),
		Reason:        optString(st.GetReason()),
		Message:       optString(st.GetMessage()),
		SourceNode:    optString(ms.GetSourceNode()),
		TargetNode:    optString(target),
		Method:        optString(ms.GetMethod()),
		Mode:          optString(ms.GetMode()),
		StartTime:     optTime(ms.GetStartTimestamp()),
		EndTime:       optTime(ms.GetEndTimestamp()),
		Completed:     types.BoolValue(ms.GetCompleted()),
		Failed:        types.BoolValue(ms.GetFailed()),
		FailureReason: optString(ms.GetFailureReason()),
		AbortStatus:   optString(ms.GetAbortStatus()),
		// Null until the source reported progress: a 0 would read as
		// "nothing left to send".
		DataTotalBytes:     types.Int64Null(),
		DataProcessedBytes: types.Int64Null(),
		DataRemainingBytes: types.Int64Null(),
		DowntimeMs:         types.Int64Null(),
		ElapsedMs:          types.Int64Null(),
	}
	if p := ms.GetProgress(); p != nil {
		m.DataTotalBytes = types.Int64Value(p.GetDataTotalBytes())
		m.DataProcessedBytes = types.Int64Value(p.GetDataProcessedBytes())
		m.DataRemainingBytes = types.Int64Value(p.GetDataRemainingBytes())
		m.ElapsedMs = types.Int64Value(p.GetElapsedMs())
		// QEMU measures the downtime at the switch-over only.
		if p.GetDowntimeMs() > 0 || ms.GetCompleted() {
			m.DowntimeMs = types.Int64Value(p.GetDowntimeMs())
		}
	}
	return m
}
