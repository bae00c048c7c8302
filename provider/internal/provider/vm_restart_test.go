package provider

import (
	"fmt"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Every run strategy (and one this provider does not know) × running or
// not × update_policy × a change waiting for a restart or not: what apply
// does, and the state it then waits for.
func TestDecideRestart(t *testing.T) {
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
	for _, c := range []struct {
		strategy, policy string
		running, pending bool
		action           restartAction
		why              string
		wait             string
	}{
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
	} {
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

// The table above covers every allowed value: a strategy or policy added
// to the API must be added to it.
func TestDecideRestartTableIsComplete(t *testing.T) {
	covered := map[string]bool{
		apiv1.RunStrategyAlways: true, apiv1.RunStrategyRerunOnFailure: true, apiv1.RunStrategyManual: true,
		apiv1.RunStrategyHalted: true, apiv1.RunStrategyOnce: true,
	}
	for _, s := range apiv1.RunStrategies() {
		if !covered[s] {
			t.Errorf("run strategy %q is not in TestDecideRestart", s)
		}
	}
	for _, p := range updatePolicies {
		if p != updatePolicyRestart && p != updatePolicyNone {
			t.Errorf("update_policy %q is not in TestDecideRestart", p)
		}
	}
}
