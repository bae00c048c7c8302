package driver

import "fmt"

// State is a virDomainState value. The numbers are libvirt's stable ABI;
// virt's tests check them against the bindings.
type State int

// libvirt domain states.
const (
	StateNoState     State = 0
	StateRunning     State = 1
	StateBlocked     State = 2
	StatePaused      State = 3
	StateShutdown    State = 4 // being shut down
	StateShutoff     State = 5
	StateCrashed     State = 6
	StatePMSuspended State = 7
)

// Reasons the driver acts on.
const (
	ReasonPausedUser       = 1
	ReasonShutoffDestroyed = 2
)

var stateNames = []string{"NoState", "Running", "Blocked", "Paused", "Shutdown", "Shutoff", "Crashed", "PMSuspended"}

// reasonNames are indexed by state, then by the per-state reason enum
// (virDomainRunningReason, virDomainPausedReason, …).
var reasonNames = map[State][]string{
	StateNoState: {"Unknown"},
	StateRunning: {"Unknown", "Booted", "Migrated", "Restored", "FromSnapshot", "Unpaused",
		"MigrationCanceled", "SaveCanceled", "Wakeup", "Crashed", "PostCopy", "PostCopyFailed"},
	StateBlocked: {"Unknown"},
	StatePaused: {"Unknown", "User", "Migration", "Save", "Dump", "IOError", "Watchdog",
		"FromSnapshot", "ShuttingDown", "Snapshot", "Crashed", "StartingUp", "PostCopy",
		"PostCopyFailed", "APIError"},
	StateShutdown:    {"Unknown", "User"},
	StateShutoff:     {"Unknown", "Shutdown", "Destroyed", "Crashed", "Migrated", "Saved", "Failed", "FromSnapshot", "Daemon"},
	StateCrashed:     {"Unknown", "Panicked"},
	StatePMSuspended: {"Unknown"},
}

func (s State) String() string {
	if s >= 0 && int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// ReasonName names a state reason as listed in launcher.proto.
func ReasonName(s State, reason int) string {
	names := reasonNames[s]
	if reason >= 0 && reason < len(names) {
		return names[reason]
	}
	return fmt.Sprintf("Reason(%d)", reason)
}

// Active reports whether QEMU runs for a domain in state s.
func (s State) Active() bool {
	switch s {
	case StateRunning, StateBlocked, StatePaused, StateShutdown, StatePMSuspended:
		return true
	}
	return false
}

// virDomainEventType names and their detail enums.
var eventNames = []struct {
	name    string
	details []string
}{
	{"Defined", []string{"Added", "Updated", "Renamed", "FromSnapshot"}},
	{"Undefined", []string{"Removed", "Renamed"}},
	{"Started", []string{"Booted", "Migrated", "Restored", "FromSnapshot", "Wakeup", "Recreated"}},
	{"Suspended", []string{"Paused", "Migrated", "IOError", "Watchdog", "Restored", "FromSnapshot", "APIError", "PostCopy", "PostCopyFailed"}},
	{"Resumed", []string{"Unpaused", "Migrated", "FromSnapshot", "PostCopy", "PostCopyFailed"}},
	{"Stopped", []string{"Shutdown", "Destroyed", "Crashed", "Migrated", "Saved", "Failed", "FromSnapshot"}},
	{"Shutdown", []string{"Finished", "Guest", "Host"}},
	{"PMSuspended", []string{"Memory", "Disk"}},
	{"Crashed", []string{"Panicked", "CrashLoaded"}},
}

// EventName renders a lifecycle event as "Type/Detail", e.g. "Started/Booted".
func EventName(typ, detail int) string {
	if typ < 0 || typ >= len(eventNames) {
		return fmt.Sprintf("Event(%d)/%d", typ, detail)
	}
	e := eventNames[typ]
	if detail >= 0 && detail < len(e.details) {
		return e.name + "/" + e.details[detail]
	}
	return fmt.Sprintf("%s/%d", e.name, detail)
}
