package nodeagent

import (
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// libvirt domain states, as the launcher reports them.
const (
	stateNoState     = "NoState"
	stateRunning     = "Running"
	stateBlocked     = "Blocked"
	statePaused      = "Paused"
	stateShutdown    = "Shutdown" // being shut down
	stateShutoff     = "Shutoff"
	stateCrashed     = "Crashed"
	statePMSuspended = "PMSuspended"
)

// VMI status reasons the agent writes.
const (
	ReasonGuestShutdown        = "GuestShutdown"
	ReasonDestroyed            = "Destroyed"
	ReasonGuestCrashed         = "GuestCrashed"
	ReasonFailedToStart        = "FailedToStart"
	ReasonDomainStopped        = "DomainStopped"
	ReasonDomainNotFound       = "DomainNotFound"
	ReasonDeletedBeforeStart   = "DeletedBeforeStart"
	ReasonLauncherUnresponsive = "LauncherUnresponsive"
	ReasonSyncFailed           = "SyncFailed"
	ReasonPausedByUser         = "PausedByUser"
	ReasonPausedIOError        = "PausedIOError"
)

// domainAlive is KubeVirt's "domain alive": it exists and is neither shut
// off nor crashed. NoState counts as alive: it is a transient answer, and
// taking it for dead would delete a guest.
func domainAlive(d *launcherpb.DomainStatus) bool {
	if !d.GetExists() {
		return false
	}
	switch d.GetState() {
	case stateShutoff, stateCrashed:
		return false
	}
	return true
}

// domainPhase maps a domain's libvirt state and reason to the VMI phase
// (KubeVirt calculateVmPhaseForStatusReason). grace is the VMI's
// termination grace period: a domain destroyed while a grace period
// applied was killed after the guest ignored ACPI (or by someone else)
// and failed; with grace 0 destroying it was the plan, so it succeeded.
// An empty phase means "keep the current one".
func domainPhase(d *launcherpb.DomainStatus, grace int64) (phase, reason string) {
	switch d.GetState() {
	case stateRunning, stateBlocked, statePaused, stateShutdown, statePMSuspended:
		return apiv1.PhaseRunning, ""
	case stateCrashed:
		return apiv1.PhaseFailed, ReasonGuestCrashed
	case stateShutoff:
		switch d.GetReason() {
		case "Shutdown", "Saved", "FromSnapshot":
			return apiv1.PhaseSucceeded, ReasonGuestShutdown
		case "Destroyed":
			if grace > 0 {
				return apiv1.PhaseFailed, ReasonDestroyed
			}
			return apiv1.PhaseSucceeded, ReasonDestroyed
		case "Crashed":
			return apiv1.PhaseFailed, ReasonGuestCrashed
		case "Failed":
			return apiv1.PhaseFailed, ReasonFailedToStart
		case "Migrated":
			return "", "" // the migration decides
		default:
			// Unknown or Daemon: the domain stopped and libvirt does not
			// say why. A domain the agent is about to delete must not
			// leave its VMI running, so this is a failure.
			return apiv1.PhaseFailed, ReasonDomainStopped
		}
	}
	// NoState or something new: no opinion.
	return "", ""
}

// shutoffNeverStarted reports a domain that is defined but was never
// started (or libvirt does not know why it is off): while its VMI is still
// being scheduled, it is starting rather than finished.
func shutoffNeverStarted(d *launcherpb.DomainStatus) bool {
	if !d.GetExists() || d.GetState() != stateShutoff {
		return false
	}
	switch d.GetReason() {
	case "", "Unknown":
		return true
	}
	return false
}
