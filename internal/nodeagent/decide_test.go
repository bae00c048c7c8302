package nodeagent

import (
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// KubeVirt's decision order: shutdown > delete > update.
func TestDecide(t *testing.T) {
	alive := observation{DomainExists: true, DomainAlive: true}
	off := observation{DomainExists: true}
	none := observation{}
	with := func(base observation, fn func(*observation)) observation { fn(&base); return base }
	cases := []struct {
		name string
		o    observation
		want action
	}{
		{"vmi gone, domain alive", alive, actShutdown},
		{"vmi gone, domain off", off, actDelete},
		{"vmi gone, no domain", none, actDelete},
		{"vmi deleting, domain alive", with(alive, func(o *observation) { o.VMIExists, o.VMIDeleting = true, true }), actShutdown},
		{"vmi deleting and final, domain alive: shutdown wins", with(alive, func(o *observation) { o.VMIExists, o.VMIDeleting, o.VMIFinal = true, true, true }), actShutdown},
		{"vmi deleting, domain off", with(off, func(o *observation) { o.VMIExists, o.VMIDeleting = true, true }), actDelete},
		{"vmi deleting, no domain", with(none, func(o *observation) { o.VMIExists, o.VMIDeleting = true, true }), actDelete},
		{"vmi final, domain alive: delete wins over update", with(alive, func(o *observation) { o.VMIExists, o.VMIFinal = true, true }), actDelete},
		{"vmi final, no domain", with(none, func(o *observation) { o.VMIExists, o.VMIFinal = true, true }), actDelete},
		{"domain off, vmi running", with(off, func(o *observation) { o.VMIExists = true }), actDelete},
		{"domain never started, vmi starting", with(off, func(o *observation) { o.VMIExists, o.VMIStarting, o.DomainNeverStarted = true, true, true }), actUpdate},
		{"domain never started, slow start window over", with(off, func(o *observation) { o.VMIExists, o.DomainNeverStarted = true, true }), actDelete},
		{"domain off for a reason, vmi starting", with(off, func(o *observation) { o.VMIExists, o.VMIStarting = true, true }), actDelete},
		{"vmi exists, domain alive", with(alive, func(o *observation) { o.VMIExists = true }), actUpdate},
		{"vmi exists, no domain", with(none, func(o *observation) { o.VMIExists = true }), actUpdate},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := decide(tc.o); got != tc.want {
				t.Errorf("decide(%+v) = %v, want %v", tc.o, got, tc.want)
			}
		})
	}
}

// (state, reason, grace) → VMI phase (KubeVirt calculateVmPhaseForStatusReason).
func TestDomainPhase(t *testing.T) {
	cases := []struct {
		state, reason string
		grace         int64
		phase, why    string
	}{
		{"Running", "Booted", 30, apiv1.PhaseRunning, ""},
		{"Blocked", "Unknown", 30, apiv1.PhaseRunning, ""},
		{"Paused", "User", 30, apiv1.PhaseRunning, ""},
		{"Paused", "IOError", 30, apiv1.PhaseRunning, ""},
		{"Shutdown", "User", 30, apiv1.PhaseRunning, ""},
		{"PMSuspended", "Unknown", 30, apiv1.PhaseRunning, ""},
		{"Shutoff", "Shutdown", 30, apiv1.PhaseSucceeded, ReasonGuestShutdown},
		{"Shutoff", "Shutdown", 0, apiv1.PhaseSucceeded, ReasonGuestShutdown},
		{"Shutoff", "Saved", 30, apiv1.PhaseSucceeded, ReasonGuestShutdown},
		{"Shutoff", "FromSnapshot", 30, apiv1.PhaseSucceeded, ReasonGuestShutdown},
		// Killed after ACPI had its grace period: the guest did not stop.
		{"Shutoff", "Destroyed", 30, apiv1.PhaseFailed, ReasonDestroyed},
		// Grace 0: killing it was the plan.
		{"Shutoff", "Destroyed", 0, apiv1.PhaseSucceeded, ReasonDestroyed},
		{"Shutoff", "Crashed", 30, apiv1.PhaseFailed, ReasonGuestCrashed},
		{"Shutoff", "Crashed", 0, apiv1.PhaseFailed, ReasonGuestCrashed},
		{"Shutoff", "Failed", 30, apiv1.PhaseFailed, ReasonFailedToStart},
		{"Shutoff", "Unknown", 30, apiv1.PhaseFailed, ReasonDomainStopped},
		{"Shutoff", "Daemon", 30, apiv1.PhaseFailed, ReasonDomainStopped},
		{"Shutoff", "Migrated", 30, "", ""},
		{"Crashed", "Panicked", 30, apiv1.PhaseFailed, ReasonGuestCrashed},
		{"Crashed", "Unknown", 0, apiv1.PhaseFailed, ReasonGuestCrashed},
		{"NoState", "", 30, "", ""},
	}
	for _, tc := range cases {
		d := &launcherpb.DomainStatus{Exists: true, State: tc.state, Reason: tc.reason}
		phase, why := domainPhase(d, tc.grace)
		if phase != tc.phase || why != tc.why {
			t.Errorf("%s/%s grace %d: got %q (%s), want %q (%s)", tc.state, tc.reason, tc.grace, phase, why, tc.phase, tc.why)
		}
	}
}

func TestDomainAlive(t *testing.T) {
	cases := []struct {
		d    *launcherpb.DomainStatus
		want bool
	}{
		{nil, false},
		{&launcherpb.DomainStatus{Exists: false, State: "Running"}, false},
		{&launcherpb.DomainStatus{Exists: true, State: "Running"}, true},
		{&launcherpb.DomainStatus{Exists: true, State: "Paused"}, true},
		{&launcherpb.DomainStatus{Exists: true, State: "Shutdown"}, true},
		{&launcherpb.DomainStatus{Exists: true, State: "NoState"}, true},
		{&launcherpb.DomainStatus{Exists: true, State: "Shutoff"}, false},
		{&launcherpb.DomainStatus{Exists: true, State: "Crashed"}, false},
	}
	for _, tc := range cases {
		if got := domainAlive(tc.d); got != tc.want {
			t.Errorf("domainAlive(%v) = %v, want %v", tc.d, got, tc.want)
		}
	}
}

// The phase a VMI ends with when its domain is removed.
func TestEndPhase(t *testing.T) {
	running := &apiv1.VirtualMachineInstance{Status: &apiv1.VirtualMachineInstanceStatus{Phase: apiv1.PhaseRunning}}
	scheduled := &apiv1.VirtualMachineInstance{Status: &apiv1.VirtualMachineInstanceStatus{Phase: apiv1.PhaseScheduled}}
	cases := []struct {
		name          string
		vmi           *apiv1.VirtualMachineInstance
		d             *launcherpb.DomainStatus
		grace         int64
		phase, reason string
	}{
		{"acpi shutdown", running, &launcherpb.DomainStatus{Exists: true, State: "Shutoff", Reason: "Shutdown"}, 30, apiv1.PhaseSucceeded, ReasonGuestShutdown},
		{"killed at grace expiry", running, &launcherpb.DomainStatus{Exists: true, State: "Shutoff", Reason: "Destroyed"}, 30, apiv1.PhaseFailed, ReasonDestroyed},
		{"force stop", running, &launcherpb.DomainStatus{Exists: true, State: "Shutoff", Reason: "Destroyed"}, 0, apiv1.PhaseSucceeded, ReasonDestroyed},
		{"migrated away while deleted", running, &launcherpb.DomainStatus{Exists: true, State: "Shutoff", Reason: "Migrated"}, 30, apiv1.PhaseFailed, ReasonDomainStopped},
		{"running vmi, domain vanished", running, &launcherpb.DomainStatus{}, 30, apiv1.PhaseFailed, ReasonDomainNotFound},
		{"deleted before it started", scheduled, nil, 30, apiv1.PhaseFailed, ReasonDeletedBeforeStart},
	}
	for _, tc := range cases {
		phase, reason, _ := endPhase(tc.vmi, tc.d, tc.grace)
		if phase != tc.phase || reason != tc.reason {
			t.Errorf("%s: got %s/%s, want %s/%s", tc.name, phase, reason, tc.phase, tc.reason)
		}
	}
}
