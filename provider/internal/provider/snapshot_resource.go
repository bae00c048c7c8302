package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// The virtplane_virtual_machine_snapshot resource: KubeVirt's
// VirtualMachineSnapshot. This file has the type, its schema and model;
// snapshot_crud.go create, read and delete; snapshot_wait.go the waits.

var (
	_ resource.Resource                = (*snapshotResource)(nil)
	_ resource.ResourceWithConfigure   = (*snapshotResource)(nil)
	_ resource.ResourceWithImportState = (*snapshotResource)(nil)
)

var snapshotKind = objectKind{noun: "virtual machine snapshot", title: "Virtual machine snapshot", one: "a snapshot",
	short: "snapshot", logKey: "snapshot", importID: "namespace/name", attribute: snapshotAttributePath}

// NewSnapshotResource returns the virtplane_virtual_machine_snapshot resource.
func NewSnapshotResource() resource.Resource {
	return &snapshotResource{configuredResource{kind: snapshotKind}}
}

type snapshotResource struct {
	configuredResource
}

// snapshotModel is what the resource and the data source share.
type snapshotModel struct {
	ID              types.String `tfsdk:"id"`
	Namespace       types.String `tfsdk:"namespace"`
	Name            types.String `tfsdk:"name"`
	VirtualMachine  types.String `tfsdk:"virtual_machine"`
	DeletionPolicy  types.String `tfsdk:"deletion_policy"`
	FailureDeadline types.String `tfsdk:"failure_deadline"`
	UID             types.String `tfsdk:"uid"`
	Phase           types.String `tfsdk:"phase"`
	ReadyToUse      types.Bool   `tfsdk:"ready_to_use"`
	CreationTime    types.String `tfsdk:"creation_time"`
	Indications     types.List   `tfsdk:"indications"`
	IncludedVolumes types.List   `tfsdk:"included_volumes"`
	ExcludedVolumes types.List   `tfsdk:"excluded_volumes"`
	NodeName        types.String `tfsdk:"node_name"`
	ContentName     types.String `tfsdk:"content_name"`
}

type snapshotResourceModel struct {
	snapshotModel
	Timeouts timeouts.Value `tfsdk:"timeouts"`
}

// defaultFailureDeadline is the API's default (300 s) as the schema
// spells it.
const defaultFailureDeadline = "5m"

// maxFailureDeadline is the longest failure_deadline the API takes.
const maxFailureDeadline = 7 * 24 * time.Hour

func (r *snapshotResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_virtual_machine_snapshot"
}

// snapshotComputedDescriptions words the computed attributes; the data
// source uses them too.
var snapshotComputedDescriptions = map[string]string{
	"id":  "`namespace/name`, also the import ID.",
	"uid": "Unique ID the agent gave the snapshot.",
	"phase": "`InProgress`, `Succeeded`, `Failed` or `Deleting`. A snapshot in the state is `Succeeded`: create " +
		"waits for that.",
	"ready_to_use":  "Whether the snapshot's data is complete and can be restored from.",
	"creation_time": "When the point in time was taken (RFC 3339); null until it is.",
	"indications": "How it was taken: `Online` (the VM ran), then `GuestAgent` (the guest's file systems were " +
		"frozen), `NoGuestAgent` or `Paused`; empty for an offline snapshot.",
	"included_volumes": "The persistent volumes whose data the snapshot holds.",
	"excluded_volumes": "Volumes left out: image volumes and cloud-init seeds (made again from the spec), and " +
		"persistent volumes never provisioned (the VM never ran).",
	"node_name":    "The node whose disk holds the snapshot's data; a VM restored from it runs there.",
	"content_name": "The snapshot's VirtualMachineSnapshotContent, the record of its data.",
}

func (r *snapshotResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	attrs := map[string]schema.Attribute{
		"name": schema.StringAttribute{
			Required:      true,
			Description:   "Name of the snapshot, unique in its namespace: a DNS-1123 label. Changing it replaces the snapshot.",
			Validators:    []validator.String{dnsLabelValidator()},
			PlanModifiers: replace,
		},
		"namespace": schema.StringAttribute{
			Optional:      true,
			Computed:      true,
			Default:       stringdefault.StaticString(apiv1.DefaultNamespace),
			Description:   "Namespace of the snapshot and its VM. Default `default`. Changing it replaces the snapshot.",
			Validators:    []validator.String{dnsLabelValidator()},
			PlanModifiers: replace,
		},
		"virtual_machine": schema.StringAttribute{
			Required: true,
			Description: "Name of the VM to snapshot, in the snapshot's namespace. It may run (an online snapshot: " +
				"the guest keeps running) or be stopped. Changing it replaces the snapshot.",
			Validators:    []validator.String{dnsLabelValidator()},
			PlanModifiers: replace,
		},
		"deletion_policy": schema.StringAttribute{
			Optional: true,
			Computed: true,
			Default:  stringdefault.StaticString(apiv1.DeletionPolicyDelete),
			Description: "What destroying the snapshot does with its data: `Delete` (default) removes it from the " +
				"node; `Retain` keeps its content record and data. Changing it replaces the snapshot.",
			Validators:    []validator.String{oneOf(apiv1.DeletionPolicyDelete, apiv1.DeletionPolicyRetain)},
			PlanModifiers: replace,
		},
		"failure_deadline": schema.StringAttribute{
			Optional: true,
			Computed: true,
			Default:  stringdefault.StaticString(defaultFailureDeadline),
			Description: "How long the snapshot may take before it fails (\"snapshot deadline exceeded\"), as a Go " +
				"duration in whole seconds (`90s`, `5m`, `1h`); `0s` never fails. Default `5m` (KubeVirt's). " +
				"`300s` and `5m` are the same and never show as a change. Changing it replaces the snapshot.",
			Validators: []validator.String{failureDeadlineValidator()},
			PlanModifiers: []planmodifier.String{
				keepEquivalentState{describedAs: "the same duration in another spelling is not a change", equivalent: sameDeadline},
				stringplanmodifier.RequiresReplace(),
			},
		},
	}
	for name, desc := range snapshotComputedDescriptions {
		keep := []planmodifier.String{stringplanmodifier.UseStateForUnknown()}
		switch name {
		case "ready_to_use":
			attrs[name] = schema.BoolAttribute{Computed: true, Description: desc}
		case "indications", "included_volumes", "excluded_volumes":
			attrs[name] = schema.ListAttribute{Computed: true, ElementType: types.StringType, Description: desc}
		default:
			attrs[name] = schema.StringAttribute{Computed: true, Description: desc, PlanModifiers: keep}
		}
	}
	resp.Schema = schema.Schema{
		Description: "A snapshot of a virtual machine: KubeVirt's VirtualMachineSnapshot. It holds the VM's spec " +
			"and a copy of each of its persistent volumes, on the node that has them; image volumes and cloud-init " +
			"seeds are not copied (the spec brings them back). Create waits until the snapshot has succeeded; a " +
			"snapshot that fails is deleted again and the error reported. Restore it with " +
			"virtplane_virtual_machine_restore, or start a new VM from it with virtplane_virtual_machine's source_snapshot.",
		MarkdownDescription: "A snapshot of a virtual machine: KubeVirt's `VirtualMachineSnapshot`. It holds the VM's " +
			"spec and a copy of each of its persistent volumes, on the node that has them; image volumes and " +
			"cloud-init seeds are not copied (the spec brings them back). Create waits until the snapshot has " +
			"succeeded; a snapshot that fails is deleted again and the error reported. Restore it with " +
			"`virtplane_virtual_machine_restore`, or start a new VM from it with `virtplane_virtual_machine`'s " +
			"`source_snapshot`.",
		Attributes: attrs,
		Blocks: map[string]schema.Block{
			"timeouts": timeoutsBlock(ctx, "Time limits of create and delete.", timeouts.Opts{
				Create: true, Delete: true,
				CreateDescription: "How long create may wait for the snapshot to succeed, as a Go duration (`30s`, " +
					"`15m`). Default `10m`; the snapshot's own `failure_deadline` usually ends it first.",
				DeleteDescription: "How long destroy may wait for the snapshot and (with `deletion_policy = " +
					"\"Delete\"`) its data to be gone. Default `10m`.",
			}),
		},
	}
}

// failureDeadlineValidator accepts a duration of whole seconds from 0 to
// maxFailureDeadline.
func failureDeadlineValidator() validator.String {
	return stringCheck{
		describedAs: describedAs("a Go duration of whole seconds, from 0s to 168h"),
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			if _, err := parseDeadline(s); err != nil {
				diags.AddAttributeError(p, "Invalid failure_deadline", fmt.Sprintf("%s %s.", p, err))
			}
		},
	}
}

// parseDeadline turns failure_deadline into seconds.
func parseDeadline(s string) (int64, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("is not a Go duration (90s, 5m, 1h): %q", s)
	case d < 0:
		return 0, fmt.Errorf("must not be negative, got %s", s)
	case d%time.Second != 0:
		return 0, fmt.Errorf("must be whole seconds, got %s", s)
	case d > maxFailureDeadline:
		return 0, fmt.Errorf("must be at most 168h (7 days), got %s", s)
	}
	return int64(d / time.Second), nil
}

// sameDeadline reports whether two spellings of failure_deadline mean the
// same time.
func sameDeadline(a, b string) bool {
	x, err1 := parseDeadline(a)
	y, err2 := parseDeadline(b)
	return err1 == nil && err2 == nil && x == y
}

// formatDeadline spells seconds as the shortest Go duration: 300 is "5m",
// 5400 "1h30m", 0 "0s".
func formatDeadline(secs int64) string {
	return shortDuration(time.Duration(secs) * time.Second)
}

// snapshotFromModel is the snapshot the configuration asks for. All
// values are known (apply time) and validated.
func snapshotFromModel(_ context.Context, m *snapshotModel) (*apiv1.VirtualMachineSnapshot, diag.Diagnostics) {
	var diags diag.Diagnostics
	secs, err := parseDeadline(orDefault(m.FailureDeadline.ValueString(), defaultFailureDeadline))
	if err != nil {
		diags.AddAttributeError(path.Root("failure_deadline"), "Invalid failure_deadline", "failure_deadline "+err.Error()+".")
	}
	return &apiv1.VirtualMachineSnapshot{
		Metadata: &apiv1.ObjectMeta{Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString()},
		Spec: &apiv1.VirtualMachineSnapshotSpec{
			Source:                 m.VirtualMachine.ValueString(),
			DeletionPolicy:         m.DeletionPolicy.ValueString(),
			FailureDeadlineSeconds: &secs,
		},
	}, diags
}

// snapshotToModel maps a snapshot to the model. prior (the state or plan,
// nil on import and in the data source) keeps the spelling of
// failure_deadline when it means what the API has.
func snapshotToModel(s *apiv1.VirtualMachineSnapshot, prior *snapshotModel) (snapshotModel, diag.Diagnostics) {
	var diags diag.Diagnostics
	md, spec, st := s.GetMetadata(), s.GetSpec(), s.GetStatus()
	secs := int64(apiv1.DefaultSnapshotFailureDeadlineSeconds)
	if spec.FailureDeadlineSeconds != nil {
		secs = spec.GetFailureDeadlineSeconds()
	}
	deadline := formatDeadline(secs)
	if prior != nil && !prior.FailureDeadline.IsNull() && !prior.FailureDeadline.IsUnknown() && sameDeadline(prior.FailureDeadline.ValueString(), deadline) {
		deadline = prior.FailureDeadline.ValueString()
	}
	return snapshotModel{
		ID:              types.StringValue(namespacedID(md.GetNamespace(), md.GetName())),
		Namespace:       types.StringValue(md.GetNamespace()),
		Name:            types.StringValue(md.GetName()),
		VirtualMachine:  types.StringValue(spec.GetSource()),
		DeletionPolicy:  types.StringValue(orDefault(spec.GetDeletionPolicy(), apiv1.DeletionPolicyDelete)),
		FailureDeadline: types.StringValue(deadline),
		UID:             types.StringValue(md.GetUid()),
		Phase:           optString(st.GetPhase()),
		ReadyToUse:      types.BoolValue(st.GetReadyToUse()),
		CreationTime:    optTime(st.GetCreationTime()),
		Indications:     stringList(st.GetIndications(), &diags),
		IncludedVolumes: stringList(st.GetIncludedVolumes(), &diags),
		ExcludedVolumes: stringList(st.GetExcludedVolumes(), &diags),
		NodeName:        optString(st.GetNodeName()),
		ContentName:     optString(st.GetContentName()),
	}, diags
}

// snapshotAttributePath maps a field of a rejected snapshot to its
// attribute.
func snapshotAttributePath(field string) (path.Path, bool) {
	switch field {
	case "metadata.name":
		return path.Root("name"), true
	case "metadata.namespace":
		return path.Root("namespace"), true
	case "spec.source":
		return path.Root("virtual_machine"), true
	case "spec.deletion_policy":
		return path.Root("deletion_policy"), true
	case "spec.failure_deadline_seconds":
		return path.Root("failure_deadline"), true
	}
	return path.Empty(), false
}

func (r *snapshotResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	ns, name, err := parseNamespacedID(req.ID)
	if err != nil {
		resp.Diagnostics.AddError("Invalid import ID",
			"Import a virtual machine snapshot by namespace/name (default/before-upgrade), or by name alone for the "+
				"default namespace: "+err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), namespacedID(ns, name))...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), ns)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
}
