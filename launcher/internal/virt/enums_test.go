//go:build libvirt

package virt

import (
	"testing"

	"libvirt.org/go/libvirt"

	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver"
)

// The driver keeps libvirt's enum values without importing the cgo
// bindings; this pins them to the bindings.
func TestStateValuesMatchLibvirt(t *testing.T) {
	for st, lv := range map[driver.State]libvirt.DomainState{
		driver.StateNoState:     libvirt.DOMAIN_NOSTATE,
		driver.StateRunning:     libvirt.DOMAIN_RUNNING,
		driver.StateBlocked:     libvirt.DOMAIN_BLOCKED,
		driver.StatePaused:      libvirt.DOMAIN_PAUSED,
		driver.StateShutdown:    libvirt.DOMAIN_SHUTDOWN,
		driver.StateShutoff:     libvirt.DOMAIN_SHUTOFF,
		driver.StateCrashed:     libvirt.DOMAIN_CRASHED,
		driver.StatePMSuspended: libvirt.DOMAIN_PMSUSPENDED,
	} {
		if int(st) != int(lv) {
			t.Errorf("%s = %d, libvirt has %d", st, int(st), int(lv))
		}
	}
	reasons := map[string]struct {
		state  driver.State
		reason int
	}{
		"User":           {driver.StatePaused, int(libvirt.DOMAIN_PAUSED_USER)},
		"IOError":        {driver.StatePaused, int(libvirt.DOMAIN_PAUSED_IOERROR)},
		"StartingUp":     {driver.StatePaused, int(libvirt.DOMAIN_PAUSED_STARTING_UP)},
		"APIError":       {driver.StatePaused, int(libvirt.DOMAIN_PAUSED_API_ERROR)},
		"Destroyed":      {driver.StateShutoff, int(libvirt.DOMAIN_SHUTOFF_DESTROYED)},
		"Daemon":         {driver.StateShutoff, int(libvirt.DOMAIN_SHUTOFF_DAEMON)},
		"PostCopyFailed": {driver.StateRunning, int(libvirt.DOMAIN_RUNNING_POSTCOPY_FAILED)},
		"Panicked":       {driver.StateCrashed, int(libvirt.DOMAIN_CRASHED_PANICKED)},
	}
	for want, r := range reasons {
		if got := driver.ReasonName(r.state, r.reason); got != want {
			t.Errorf("ReasonName(%s, %d) = %q, want %q", r.state, r.reason, got, want)
		}
	}
	if driver.ReasonPausedUser != int(libvirt.DOMAIN_PAUSED_USER) ||
		driver.ReasonShutoffDestroyed != int(libvirt.DOMAIN_SHUTOFF_DESTROYED) {
		t.Error("reason constants differ from libvirt")
	}
	events := map[string][2]int{
		"Started/Booted":           {int(libvirt.DOMAIN_EVENT_STARTED), int(libvirt.DOMAIN_EVENT_STARTED_BOOTED)},
		"Stopped/Destroyed":        {int(libvirt.DOMAIN_EVENT_STOPPED), int(libvirt.DOMAIN_EVENT_STOPPED_DESTROYED)},
		"Stopped/FromSnapshot":     {int(libvirt.DOMAIN_EVENT_STOPPED), int(libvirt.DOMAIN_EVENT_STOPPED_FROM_SNAPSHOT)},
		"Suspended/PostCopyFailed": {int(libvirt.DOMAIN_EVENT_SUSPENDED), int(libvirt.DOMAIN_EVENT_SUSPENDED_POSTCOPY_FAILED)},
		"Resumed/PostCopyFailed":   {int(libvirt.DOMAIN_EVENT_RESUMED), int(libvirt.DOMAIN_EVENT_RESUMED_POSTCOPY_FAILED)},
		"Shutdown/Host":            {int(libvirt.DOMAIN_EVENT_SHUTDOWN), int(libvirt.DOMAIN_EVENT_SHUTDOWN_HOST)},
		"Crashed/CrashLoaded":      {int(libvirt.DOMAIN_EVENT_CRASHED), int(libvirt.DOMAIN_EVENT_CRASHED_CRASHLOADED)},
		"Undefined/Renamed":        {int(libvirt.DOMAIN_EVENT_UNDEFINED), int(libvirt.DOMAIN_EVENT_UNDEFINED_RENAMED)},
		"PMSuspended/Disk":         {int(libvirt.DOMAIN_EVENT_PMSUSPENDED), int(libvirt.DOMAIN_EVENT_PMSUSPENDED_DISK)},
		"Defined/FromSnapshot":     {int(libvirt.DOMAIN_EVENT_DEFINED), int(libvirt.DOMAIN_EVENT_DEFINED_FROM_SNAPSHOT)},
		// The events after which the launcher applies the network.
		"Started/Migrated":  {int(libvirt.DOMAIN_EVENT_STARTED), int(libvirt.DOMAIN_EVENT_STARTED_MIGRATED)},
		"Started/Recreated": {int(libvirt.DOMAIN_EVENT_STARTED), int(libvirt.DOMAIN_EVENT_STARTED_RECREATED)},
		"Resumed/Migrated":  {int(libvirt.DOMAIN_EVENT_RESUMED), int(libvirt.DOMAIN_EVENT_RESUMED_MIGRATED)},
		"Resumed/PostCopy":  {int(libvirt.DOMAIN_EVENT_RESUMED), int(libvirt.DOMAIN_EVENT_RESUMED_POSTCOPY)},
	}
	for want, e := range events {
		if got := driver.EventName(e[0], e[1]); got != want {
			t.Errorf("EventName(%d, %d) = %q, want %q", e[0], e[1], got, want)
		}
	}
	if driver.AgentConnected != int(libvirt.CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_STATE_CONNECTED) ||
		driver.AgentDisconnected != int(libvirt.CONNECT_DOMAIN_EVENT_AGENT_LIFECYCLE_STATE_DISCONNECTED) {
		t.Error("guest agent states differ from libvirt")
	}
	for src, lv := range map[driver.AddressSource]libvirt.DomainInterfaceAddressesSource{
		driver.SourceLease: libvirt.DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE,
		driver.SourceAgent: libvirt.DOMAIN_INTERFACE_ADDRESSES_SRC_AGENT,
		driver.SourceARP:   libvirt.DOMAIN_INTERFACE_ADDRESSES_SRC_ARP,
	} {
		if int(src) != int(lv) {
			t.Errorf("address source %d, libvirt has %d", src, lv)
		}
	}
}
