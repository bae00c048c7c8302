package vmlifecycle

import "fmt"

// RefusedError means the verb does not apply to the VM in its current state
// (KubeVirt answers 409 Conflict). Message is KubeVirt's wording so that
// users searching for it find KubeVirt's documentation and issues.
type RefusedError struct {
	Message string
}

func (e *RefusedError) Error() string { return e.Message }

func refused(format string, args ...any) error {
	return &RefusedError{Message: fmt.Sprintf(format, args...)}
}

// InvalidError means the request itself is malformed whatever the VM's state
// (KubeVirt answers 400 Bad Request).
type InvalidError struct {
	Field   string
	Message string
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Message }

// Refusal messages shared by several verbs.
const (
	msgVMNotRunning     = "VM is not running"
	msgVMAlreadyRunning = "VM is already running"
	msgVMINotRunning    = "VMI is not running"
	msgUnderway         = "unable to complete request: stop/start already underway"
)
