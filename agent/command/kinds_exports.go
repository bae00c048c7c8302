package command

import (
	"context"
	"strings"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// The kind of exports.proto. Exports are made by `export create` (or
// `export download`), never applied: Create's answer carries the token,
// which only the creator is told.
var exportResource = kind[*apiv1.VirtualMachineExport, *apiv1.ExportEvent]{
	resource: resource{
		Kind: apiv1.KindExport, Singular: "virtualmachineexport", Namespaced: true,
		names: []string{"vmexport", "vmexports", "export", "exports",
			"virtualmachineexport", "virtualmachineexports"},
		columns:     []string{"NAME", "SOURCE", "PHASE", "NODE", "EXPIRES", "AGE"},
		wideColumns: []string{"VOLUMES", "REASON"},
	},
	row: func(e *apiv1.VirtualMachineExport, now time.Time) []string {
		spec, st := e.GetSpec(), e.GetStatus()
		source := "vm/" + spec.GetSourceName()
		if spec.GetSourceKind() == apiv1.KindSnapshot {
			source = "vmsnapshot/" + spec.GetSourceName()
		}
		expires := "<none>"
		if t := st.GetExpirationTime(); t != nil {
			if d := t.AsTime().Sub(now); d > 0 {
				expires = "in " + d.Round(time.Second).String()
			} else {
				expires = "expired"
			}
		}
		return []string{e.GetMetadata().GetName(), source, cell(st.GetPhase()), cell(st.GetNodeName()), expires,
			age(e.GetMetadata().GetCreationTimestamp(), now)}
	},
	wide: func(e *apiv1.VirtualMachineExport) []string {
		var vols []string
		for _, v := range e.GetStatus().GetVolumes() {
			vols = append(vols, v.GetName())
		}
		return []string{cell(strings.Join(vols, ",")), cell(apiv1.FindCondition(e.GetStatus().GetConditions(), apiv1.ConditionReady).GetReason())}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineExport, error) {
		return c.Exports.Get(ctx, &apiv1.GetExportRequest{Key: key})
	},
	list: paged(func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) (*apiv1.ListExportsResponse, error) {
		return c.Exports.List(ctx, &apiv1.ListExportsRequest{Options: o})
	}),
	watch: func(ctx context.Context, c *client.Client, o *apiv1.WatchOptions) (client.Stream[*apiv1.ExportEvent], error) {
		return c.Exports.Watch(ctx, &apiv1.WatchExportsRequest{Options: o})
	},
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineExport, error) {
		return c.Exports.Delete(ctx, &apiv1.DeleteExportRequest{Key: key})
	},
}.define()
