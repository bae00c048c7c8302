package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

func (r *backupScheduleResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	keep := func(what string) schema.Int64Attribute {
		return schema.Int64Attribute{Optional: true, MarkdownDescription: what + " Unset or 0: no such rule.",
			Validators: []validator.Int64{int64validator.Between(0, validation.MaxRetention)}}
	}
	computed := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Backups of a VM to a backup target on a schedule (docs/backups.md): one at a time, each a " +
			"consistent point (a snapshot, the guest agent's freeze) uploaded by one node, incremental after the first; a " +
			"time missed while no leader ran is made up once. After each backup the schedule's succeeded backups go " +
			"through `retention` and those it drops are deleted with their data. Destroying the schedule keeps its " +
			"backups (their objects and data). The schedule, retention and `suspend` change in place; the VM and the " +
			"target replace it.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "`namespace/name`, also the import ID.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, PlanModifiers: replace,
				MarkdownDescription: fmt.Sprintf("Name of the schedule: a DNS-1123 label of at most %d characters (its backups are named `<name>-<unix time>`). Changing it replaces the schedule.", validation.MaxScheduleNameLen),
				Validators:          []validator.String{dnsLabelValidator(), scheduleNameLength()}},
			"namespace": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(apiv1.DefaultNamespace),
				PlanModifiers: replace, Validators: []validator.String{dnsLabelValidator()},
				MarkdownDescription: "Namespace of the schedule and its VM. Default `default`. Changing it replaces the schedule."},
			"virtual_machine": schema.StringAttribute{Required: true, PlanModifiers: replace, Validators: []validator.String{dnsLabelValidator()},
				MarkdownDescription: "Name of the VM to back up, in the schedule's namespace. Changing it replaces the schedule."},
			"target": schema.StringAttribute{Required: true, PlanModifiers: replace, Validators: []validator.String{dnsLabelValidator()},
				MarkdownDescription: "Name of the backup target (`virtplane_backup_target.<name>.name`). Changing it replaces the schedule."},
			"schedule": schema.StringAttribute{Required: true, Validators: []validator.String{cronValidator()},
				MarkdownDescription: fmt.Sprintf("When to back up: standard cron (5 fields, UTC: `0 3 * * *`), a descriptor (`@daily`, `@hourly`) or an interval (`@every 6h`, at least %s). Changes in place.", validation.MinBackupInterval)},
			"suspend": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				MarkdownDescription: "No new backups while true (retention still applies). Changes in place."},
			"uid":                    computed("Unique ID the agent gave the schedule."),
			"last_backup":            computed("The last backup the schedule made (a `virtplane_virtual_machine_backup` name); null before the first."),
			"last_successful_backup": computed("The last backup that succeeded; null before the first."),
			"next_time":              computed("When the next backup is due (RFC 3339, UTC); null while suspended."),
		},
		Blocks: map[string]schema.Block{
			"retention": schema.SingleNestedBlock{
				MarkdownDescription: "Which of the schedule's succeeded backups to keep (restic's and Proxmox Backup Server's rules): a backup any rule keeps is kept, and the newest always is. Without the block every backup is kept. Changes in place.",
				Attributes: map[string]schema.Attribute{
					"keep_last":   keep("The newest N backups."),
					"keep_daily":  keep("The newest backup of each of the last N days (UTC) that have one."),
					"keep_weekly": keep("The newest backup of each of the last N ISO weeks that have one."),
				},
			},
		},
	}
}

// cronValidator checks a schedule as the agent parses it.
func cronValidator() validator.String {
	return stringCheck{
		describedAs: "must be a cron schedule, a descriptor or an interval the agent accepts",
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			if _, err := validation.ParseBackupSchedule(s); err != nil {
				diags.AddAttributeError(p, "Invalid schedule", fmt.Sprintf("%q: %v.", s, err))
			}
		},
	}
}

func scheduleNameLength() validator.String {
	return stringCheck{
		describedAs: describedAs(fmt.Sprintf("must be at most %d characters", validation.MaxScheduleNameLen)),
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			if len(s) > validation.MaxScheduleNameLen {
				diags.AddAttributeError(p, "Name too long", fmt.Sprintf("A schedule's name is at most %d characters (its backups are named <name>-<unix time>); %q has %d.", validation.MaxScheduleNameLen, s, len(s)))
			}
		},
	}
}
