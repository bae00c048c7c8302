package provider

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/types"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// restartCases: every run strategy (and one this provider does not
// know) × update_policy × running or not × a change waiting for a restart
// or not, with what apply does and the state it then waits for.
type restartCase struct {
	strategy, policy string
	running, pending bool
	action           restartAction
	why              string
	wait             string
}

func restartCases() []restartCase {
	const (
		always, rerun, manual = apiv1.RunStrategyAlways, apiv1.RunStrategyRerunOnFailure, apiv1.RunStrategyManual
		halted, once, unknown = apiv1.RunStrategyHalted, apiv1.RunStrategyOnce, "Sometimes"
		restart, none         = updatePolicyRestart, updatePolicyNone
		run, stopped          = true, false
		pending, settled      = true, false
	)
	const (
		whyPolicy = `update_policy = "none"`
		whyOnce   = `run_strategy = "Once" is never restarted by the provider`
		whyNewer  = `run_strategy = "Sometimes" is never restarted by the provider`
	)
	return []restartCase{
		{always, restart, run, pending, restartNow, "", always},
		{always, restart, run, settled, restartNone, "", always},
		{always, restart, stopped, pending, restartNone, "", always},
		{always, restart, stopped, settled, restartNone, "", always},
		{always, none, run, pending, restartDeferred, whyPolicy, always},
		{always, none, run, settled, restartNone, "", always},
		{always, none, stopped, pending, restartNone, "", always},
		{always, none, stopped, settled, restartNone, "", always},

		{rerun, restart, run, pending, restartNow, "", rerun},
		{rerun, restart, run, settled, restartNone, "", rerun},
		{rerun, restart, stopped, pending, restartNone, "", rerun},
		{rerun, restart, stopped, settled, restartNone, "", rerun},
		{rerun, none, run, pending, restartDeferred, whyPolicy, rerun},
		{rerun, none, run, settled, restartNone, "", rerun},
		{rerun, none, stopped, pending, restartNone, "", rerun},
		{rerun, none, stopped, settled, restartNone, "", rerun},

		// A Manual VM restarted because it ran runs again: Always's wait.
		{manual, restart, run, pending, restartNow, "", always},
		{manual, restart, run, settled, restartNone, "", manual},
		{manual, restart, stopped, pending, restartNone, "", manual},
		{manual, restart, stopped, settled, restartNone, "", manual},
		{manual, none, run, pending, restartDeferred, whyPolicy, manual},
		{manual, none, run, settled, restartNone, "", manual},
		{manual, none, stopped, pending, restartNone, "", manual},
		{manual, none, stopped, settled, restartNone, "", manual},

		// Halted stops the VM; it starts with the new settings.
		{halted, restart, run, pending, restartNone, "", halted},
		{halted, restart, run, settled, restartNone, "", halted},
		{halted, restart, stopped, pending, restartNone, "", halted},
		{halted, restart, stopped, settled, restartNone, "", halted},
		{halted, none, run, pending, restartNone, "", halted},
		{halted, none, run, settled, restartNone, "", halted},
		{halted, none, stopped, pending, restartNone, "", halted},
		{halted, none, stopped, settled, restartNone, "", halted},

		{once, restart, run, pending, restartDeferred, whyOnce, once},
		{once, restart, run, settled, restartNone, "", once},
		{once, restart, stopped, pending, restartNone, "", once},
		{once, restart, stopped, settled, restartNone, "", once},
		{once, none, run, pending, restartDeferred, whyPolicy, once},
		{once, none, run, settled, restartNone, "", once},
		{once, none, stopped, pending, restartNone, "", once},
		{once, none, stopped, settled, restartNone, "", once},

		// A strategy of a newer agent is never restarted.
		{unknown, restart, run, pending, restartDeferred, whyNewer, unknown},
		{unknown, restart, run, settled, restartNone, "", unknown},
		{unknown, restart, stopped, pending, restartNone, "", unknown},
		{unknown, restart, stopped, settled, restartNone, "", unknown},
		{unknown, none, run, pending, restartDeferred, whyPolicy, unknown},
		{unknown, none, run, settled, restartNone, "", unknown},
		{unknown, none, stopped, pending, restartNone, "", unknown},
		{unknown, none, stopped, settled, restartNone, "", unknown},
	}
}

// Every run strategy (and one this provider does not know) × running or
// not × update_policy × a change waiting for a restart or not: what apply
// does, and the state it then waits for.
func TestDecideRestart(t *testing.T) {
	for _, c := range restartCases() {
		name := fmt.Sprintf("%s/%s/running=%v/pending=%v", c.strategy, c.policy, c.running, c.pending)
		t.Run(name, func(t *testing.T) {
			d := decideRestart(c.strategy, c.policy, c.running, c.pending)
			if d.action != c.action || d.why != c.why || d.wait != c.wait {
				t.Errorf("decideRestart = {action %d, why %q, wait %s}, want {action %d, why %q, wait %s}",
					d.action, d.why, d.wait, c.action, c.why, c.wait)
			}
			// Only a restart asks for a new instance.
			want := waitTarget{strategy: c.wait, generation: 7}
			if c.action == restartNow {
				want.notUID = "old-instance"
			}
			if got := d.target(7, "old-instance"); got != want {
				t.Errorf("target = %+v, want %+v", got, want)
			}
		})
	}
}

// The table covers every combination of every allowed value: a strategy
// or policy added to the API, or a row deleted, fails here.
func TestDecideRestartTableIsComplete(t *testing.T) {
	rows := map[string]bool{}
	for _, c := range restartCases() {
		rows[fmt.Sprint(c.strategy, c.policy, c.running, c.pending)] = true
	}
	for _, s := range append(apiv1.RunStrategies(), "Sometimes") {
		for _, p := range updatePolicies {
			for _, running := range []bool{true, false} {
				for _, pending := range []bool{true, false} {
					if !rows[fmt.Sprint(s, p, running, pending)] {
						t.Errorf("no row for %s/%s/running=%v/pending=%v", s, p, running, pending)
					}
				}
			}
		}
	}
}

func TestRestartChanges(t *testing.T) {
	ctx := context.Background()
	base := fullModel(t)
	for _, c := range []struct {
		name string
		edit func(m *vmModel)
		want string
	}{
		{"nothing", func(*vmModel) {}, ""},
		{"memory spelled differently", func(m *vmModel) { m.Memory = quantityOf("1Gi") }, ""},
		{"memory", func(m *vmModel) { m.Memory = quantityOf("2Gi") }, "memory"},
		{"labels, annotations, strategy and grace never restart", func(m *vmModel) {
			m.Labels = types.MapNull(types.StringType)
			m.Annotations = types.MapNull(types.StringType)
			m.RunStrategy = types.StringValue("Halted")
			m.TerminationGracePeriod = types.Int64Value(99)
		}, ""},
		{"default bus spelled out", func(m *vmModel) {
			m.Disks = append([]diskModel(nil), m.Disks...)
			m.Disks[0].Bus = types.StringNull()
		}, ""},
		{"cpu and disk", func(m *vmModel) {
			m.CPU = nil
			m.Disks = m.Disks[:1]
		}, "cpu, disk"},
		{"a persistent disk grows: online", func(m *vmModel) {
			m.Disks = append([]diskModel(nil), m.Disks...)
			m.Disks[0].Persistent = &persistentModel{Size: quantityOf("20Gi"), Image: m.Disks[0].Persistent.Image, StorageClass: m.Disks[0].Persistent.StorageClass}
		}, ""},
		{"a persistent disk grows and another disk goes", func(m *vmModel) {
			m.Disks = append([]diskModel(nil), m.Disks[:2]...)
			m.Disks[0].Persistent = &persistentModel{Size: quantityOf("20Gi"), Image: m.Disks[0].Persistent.Image, StorageClass: m.Disks[0].Persistent.StorageClass}
		}, "disk"},
		{"a persistent disk shrinks", func(m *vmModel) {
			m.Disks = append([]diskModel(nil), m.Disks...)
			m.Disks[0].Persistent = &persistentModel{Size: quantityOf("5Gi"), Image: m.Disks[0].Persistent.Image, StorageClass: m.Disks[0].Persistent.StorageClass}
		}, "disk"},
		{"cloud-init user data", func(m *vmModel) {
			m.Disks = append([]diskModel(nil), m.Disks...)
			m.Disks[2].CloudInit = &cloudInitModel{UserData: types.StringValue("#cloud-config\nx: 1\n"), NetworkData: m.Disks[2].CloudInit.NetworkData}
		}, "disk"},
		{"boot, interface, node_selector", func(m *vmModel) {
			m.Boot = nil
			m.Interfaces = nil
			m.NodeSelector = types.MapNull(types.StringType)
		}, "boot, interface, node_selector"},
		{"a port forward", func(m *vmModel) {
			m.Interfaces = slices.Clone(m.Interfaces)
			m.Interfaces[0].PortForwards = m.Interfaces[0].PortForwards[:1]
		}, "interface"},
		{"a port forward's default spelled out", func(m *vmModel) {
			m.Interfaces = slices.Clone(m.Interfaces)
			m.Interfaces[0].PortForwards = slices.Clone(m.Interfaces[0].PortForwards)
			m.Interfaces[0].PortForwards[0].Protocol = types.StringValue("tcp")
		}, ""},
		{"a VLAN", func(m *vmModel) {
			m.Interfaces = slices.Clone(m.Interfaces)
			m.Interfaces[1].Bridge = &bridgeModel{Name: types.StringValue("br0"), VLAN: types.Int64Null()}
		}, "interface"},
		{"bridge to libvirt network", func(m *vmModel) {
			m.Interfaces = slices.Clone(m.Interfaces)
			m.Interfaces[1].Bridge, m.Interfaces[1].Network = nil, &libvirtNetworkModel{Name: types.StringValue("lan")}
		}, "interface"},
		{"bootloader", func(m *vmModel) {
			m.Boot = nil
			m.Bootloader = &bootloaderModel{EFI: &efiModel{SecureBoot: types.BoolNull()}}
		}, "boot, bootloader"},
	} {
		t.Run(c.name, func(t *testing.T) {
			plan := base
			c.edit(&plan)
			changed, _ := restartChanges(ctx, &base, &plan)
			if got := strings.Join(changed, ", "); got != c.want {
				t.Errorf("restartChanges = %q, want %q", got, c.want)
			}
		})
	}
}
