package provider

import (
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// With the failed instance already gone, the error still says why it
// failed, from what the VM kept.
func TestCrashLoopErrorQuotesKeptCause(t *testing.T) {
	vm := &apiv1.VirtualMachine{Status: &apiv1.VirtualMachineStatus{StartFailure: &apiv1.VirtualMachineStartFailure{
		ConsecutiveFailCount: 2, LastFailureReason: "SyncFailed",
		LastFailureMessage: "unable to stat: /var/lib/virtplane/images/vmlinuz: No such file or directory",
	}}}
	err := crashLoopError(vm, nil)
	if !strings.Contains(err.Error(), "SyncFailed: unable to stat: /var/lib/virtplane/images/vmlinuz") {
		t.Fatalf("error does not quote the cause: %v", err)
	}
}
