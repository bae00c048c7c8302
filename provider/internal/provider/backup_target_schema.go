package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// The schema of the virtplane_backup_target resource; its descriptions
// are the documentation.

func (r *backupTargetResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	field := func(name, fieldPath, desc string, mods []planmodifier.String) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, MarkdownDescription: desc,
			Validators: []validator.String{backupTargetFieldValidator(fieldPath)}, PlanModifiers: mods}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A backup target: where backups of VMs go, off the nodes (docs/backups.md). Exactly one of " +
			"`directory` (a filesystem mounted at the same path on the servers and on every node the target selects: " +
			"NFS) and `s3` (a bucket prefix of an S3-compatible service). Content-addressed, compressed and checksummed " +
			"chunks shared by every backup in the target, one manifest per backup: another virtplane cluster with a " +
			"target on the same place lists and restores the backups. The kind, the directory's path and the S3 " +
			"endpoint, bucket and prefix cannot change (the backups are there): changing one replaces the target, which " +
			"the agent refuses while a backup, schedule or restore names it. The node selector, region, keys and CA " +
			"change in place.\n\nThe secret key is write-only on the agent: no read returns it (`key_set` says whether " +
			"one is stored); Terraform keeps the configured value in its state (sensitive, never shown in plans).",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "The target's name, also the import ID.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, PlanModifiers: replace,
				MarkdownDescription: "Name of the target, which backups and schedules name: a DNS-1123 label. Changing it replaces the target.",
				Validators:          []validator.String{backupTargetFieldValidator("metadata.name")}},
			"node_selector": schema.MapAttribute{Optional: true, ElementType: types.StringType, Validators: []validator.Map{labelMapValidator()},
				MarkdownDescription: "Labels a node must all have to upload backups to the target and restore from it; unset: every node. Changes in place."},
			"uid": schema.StringAttribute{Computed: true, MarkdownDescription: "Unique ID the agent gave the target.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"key_set": schema.BoolAttribute{Computed: true, MarkdownDescription: "Whether the agent holds an S3 secret key for the target (reads never return it). False for a directory."},
			"ready":   schema.BoolAttribute{Computed: true, MarkdownDescription: "Whether the server wrote, read back and deleted a probe object in the target (its `Ready` condition is `True`)."},
			"message": schema.StringAttribute{Computed: true, MarkdownDescription: "Why the target is not ready (naming the attribute to look at: a wrong key, a missing bucket or directory, an unreachable endpoint); null when it says nothing."},
		},
		Blocks: map[string]schema.Block{
			"directory": schema.SingleNestedBlock{
				MarkdownDescription: "A directory on a filesystem mounted at the same path on the servers and on every node the target selects. Setting or removing the block replaces the target.",
				PlanModifiers:       []planmodifier.Object{backupTargetKindReplaces()},
				Attributes: map[string]schema.Attribute{
					"path": field("path", "spec.directory.path", "Absolute, clean path of the directory; it must exist. Required. Changing it replaces the target.", replace),
				},
			},
			"s3": schema.SingleNestedBlock{
				MarkdownDescription: "A bucket (and a prefix in it) of an S3-compatible service (AWS S3, Ceph's radosgw, MinIO). Setting or removing the block replaces the target.",
				PlanModifiers:       []planmodifier.Object{backupTargetKindReplaces()},
				Attributes: map[string]schema.Attribute{
					"endpoint":   field("endpoint", "spec.s3.endpoint", "The service's URL: `https://` or `http://`, a host and an optional port, no path. Required. Changing it replaces the target.", replace),
					"bucket":     field("bucket", "spec.s3.bucket", "The bucket; it must exist. Required. Changing it replaces the target.", replace),
					"prefix":     field("prefix", "spec.s3.prefix", "Objects are kept under this prefix (`a/b`, no leading or trailing `/`). Changing it replaces the target.", replace),
					"region":     field("region", "spec.s3.region", "The region to sign requests for; unset: the service's default. Changes in place.", nil),
					"access_key": field("access_key", "spec.s3.access_key", "The access key. Required. Changes in place.", nil),
					"secret_key": func() schema.StringAttribute {
						a := field("secret_key", "spec.s3.secret_key", "The secret key of `access_key`. Required. Sensitive: the agent hands it only to the nodes that upload or restore a backup; no read returns it. Changes in place.", nil)
						a.Sensitive = true
						return a
					}(),
					"ca_cert": field("ca_cert", "spec.s3.ca_cert", "PEM of the CA that signed the service's certificate (`https` only); unset trusts the hosts' CAs. Changes in place.", nil),
				},
			},
		},
	}
}

// backupTargetKindReplaces replaces the target when its block is set
// where it was not, or removed: the kind of a target cannot change.
func backupTargetKindReplaces() planmodifier.Object {
	const why = "Changing the kind of a backup target (directory, s3) replaces it."
	return objectplanmodifier.RequiresReplaceIf(func(_ context.Context, req planmodifier.ObjectRequest, resp *objectplanmodifier.RequiresReplaceIfFuncResponse) {
		resp.RequiresReplace = req.StateValue.IsNull() != req.PlanValue.IsNull()
	}, why, why)
}
