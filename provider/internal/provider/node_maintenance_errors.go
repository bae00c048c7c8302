package provider

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
)

// How virtplane_node_maintenance words what goes wrong: its objectKind,
// and why the wait for a drain ended early.

// nodeMaintenanceKind words the diagnostics about node maintenances.
var nodeMaintenanceKind = objectKind{noun: "node maintenance", title: "Node", one: "a node", short: "node maintenance",
	logKey: "node", importID: "NODE", attribute: func(string) (path.Path, bool) { return path.Root("node"), true }}

// addWaitError explains why the wait for node name to drain ended early
// (err): time ran out, the drain was canceled, or a call failed.
func (r *nodeMaintenanceResource) addWaitError(diags *diag.Diagnostics, err error, name string, timeout time.Duration) {
	switch {
	case errors.Is(err, errWaitTimeout):
		diags.AddError("Node "+name+" not drained",
			fmt.Sprintf("node %s not drained after %s: %s.\n\nThe node stays cordoned and draining. An instance whose "+
				"eviction_strategy is LiveMigrate and that is not live-migratable, or External, leaves only when it "+
				"is stopped or moved by other means. Raise timeouts.create to wait longer. The resource is tainted: "+
				"destroy uncordons the node, and the next apply replaces it, draining the node again.",
				name, timeout, strings.TrimPrefix(err.Error(), errWaitTimeout.Error()+": ")))
	case errors.Is(err, errDrainCanceled):
		diags.AddError("Node "+name+" not drained",
			fmt.Sprintf("node %s: %s. The next apply cordons and drains it again.", name, err))
	default:
		r.addError(diags, err, "wait for node "+name+" to drain")
	}
}
