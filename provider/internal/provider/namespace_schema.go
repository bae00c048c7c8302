package provider

import (
	"context"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// The schema of the virtplane_namespace resource; its descriptions are
// the documentation (docs/security.md, "Namespaces").

// namespaceDescriptions are shared by the resource and the data source.
var namespaceDescriptions = map[string]string{
	"quota": "What the namespace's objects may ask for in all, counted as Kubernetes' ResourceQuota counts requests: " +
		"every VM (running or not) and every instance of a replica set. A write that would go beyond a bound is " +
		"refused, naming the bound, what is used and what the write asks. A bound left unset is unlimited.",
	"vcpus":              "Virtual CPUs: sockets × cores × threads of each VM.",
	"memory":             "Guest memory of all VMs, a quantity (`64Gi`).",
	"vms":                "VMs, counting the instances of replica sets.",
	"images":             "Images the namespace's editors made (label `virtplane.io/namespace`).",
	"persistent_storage": "Sizes of persistent volumes per storage class name, quantities; the key `\"\"` bounds volumes on the node's disk (no class). A class not listed is unlimited.",
	"allowed": "Which host resources the namespace's VMs may use, within the server's host policy " +
		"(`serve --allowed-bridges` and friends). A list left unset is everything the host policy allows; an empty list allows nothing.",
	"bridges":             "Linux bridges (a bridge network, a port forward's bridge).",
	"networks":            "libvirt networks.",
	"storage_classes":     "Storage classes persistent volumes may name (`\"\"` is the node's disk).",
	"port_forward_ranges": "Host ports of port forwards: `\"8080\"` or `\"20000-20999\"`.",
	"used":                "What the namespace's objects ask for now, in the quota's units (the server keeps it in the same transaction as every write that changes it).",
}

// quantityMapValidator checks that every value of a map is a quantity
// (persistent_storage), so a typo fails the plan on its key.
func quantityMapValidator() validator.Map {
	return mapCheck{
		describedAs: "values must be quantities such as 500Gi",
		check: func(p path.Path, elems map[string]attr.Value, diags *diag.Diagnostics) {
			for k, e := range elems {
				s, ok := e.(types.String)
				if !ok || s.IsNull() || s.IsUnknown() {
					continue
				}
				if _, err := validation.CanonicalQuantity(s.ValueString()); err != nil {
					diags.AddAttributeError(p.AtMapKey(k), "Invalid quantity", quantityHelp(fmt.Sprintf("%s[%q]", p, k), s.ValueString()))
				}
			}
		},
	}
}

// portRangeValidator checks a port-forward range as the agent does
// ("8080", "20000-20999").
func portRangeValidator() validator.String {
	return stringCheck{
		describedAs: `a port or a range of ports: "8080" or "20000-20999"`,
		check: func(p path.Path, s string, diags *diag.Diagnostics) {
			if _, err := validation.ParsePortRange(s); err != nil {
				diags.AddAttributeError(p, "Invalid port range", p.String()+": "+err.Error())
			}
		},
	}
}

func (r *namespaceResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	desc := namespaceDescriptions
	count := func(name string) schema.Int64Attribute {
		return schema.Int64Attribute{Optional: true, MarkdownDescription: desc[name] + " Unset: unlimited.",
			Validators: []validator.Int64{int64validator.AtLeast(0)}}
	}
	list := func(name string) schema.ListAttribute {
		return schema.ListAttribute{Optional: true, ElementType: types.StringType, MarkdownDescription: desc[name]}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "A namespace as an object (docs/security.md): its quota and the host resources its VMs may use, " +
			"set by cluster-admins, and what its objects use now. A namespace that has objects but no object of its own yet " +
			"(made by a first write in it) is imported rather than created. The agent deletes a namespace only when it is empty: " +
			"make the resources in it depend on this one (`namespace = virtplane_namespace.team.name`) so that Terraform destroys them first.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Computed: true, MarkdownDescription: "The namespace's name, also the import ID.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name": schema.StringAttribute{Required: true, MarkdownDescription: "The namespace, a DNS-1123 label. Changing it replaces the namespace.",
				Validators: []validator.String{dnsLabelValidator()}, PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()}},
			"uid": schema.StringAttribute{Computed: true, MarkdownDescription: "Unique ID the agent gave the namespace.",
				PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"used": schema.SingleNestedAttribute{Computed: true, MarkdownDescription: desc["used"],
				Attributes: map[string]schema.Attribute{
					"vcpus":              schema.Int64Attribute{Computed: true, MarkdownDescription: desc["vcpus"]},
					"memory":             schema.StringAttribute{Computed: true, MarkdownDescription: "Guest memory, a quantity."},
					"vms":                schema.Int64Attribute{Computed: true, MarkdownDescription: desc["vms"]},
					"images":             schema.Int64Attribute{Computed: true, MarkdownDescription: desc["images"]},
					"persistent_storage": schema.MapAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "Persistent volumes' sizes per storage class."},
				}},
		},
		Blocks: map[string]schema.Block{
			"quota": schema.SingleNestedBlock{MarkdownDescription: desc["quota"] + " Changes in place.",
				Attributes: map[string]schema.Attribute{
					"vcpus":  count("vcpus"),
					"memory": schema.StringAttribute{Optional: true, CustomType: quantityType{}, MarkdownDescription: desc["memory"] + " Unset: unlimited."},
					"vms":    count("vms"),
					"images": count("images"),
					"persistent_storage": schema.MapAttribute{Optional: true, ElementType: types.StringType,
						MarkdownDescription: desc["persistent_storage"], Validators: []validator.Map{quantityMapValidator()}},
				}},
			"allowed": schema.SingleNestedBlock{MarkdownDescription: desc["allowed"] + " Changes in place.",
				Attributes: map[string]schema.Attribute{
					"bridges": list("bridges"), "networks": list("networks"),
					"storage_classes": list("storage_classes"),
					"port_forward_ranges": func() schema.ListAttribute {
						a := list("port_forward_ranges")
						a.Validators = []validator.List{listvalidator.ValueStringsAre(portRangeValidator())}
						return a
					}(),
				}},
		},
	}
}
