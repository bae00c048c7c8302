package provider

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// How virtplane_virtual_machine words what goes wrong: its objectKind
// (its attributes' mapping, vmAttributePath, is the template's), and why
// a wait for the run strategy's state or for an IP address ended early.

// vmKind words the diagnostics about virtual machines.
var vmKind = objectKind{noun: "virtual machine", title: "Virtual machine", one: "a VM", short: "VM",
	logKey: "vm", importID: "namespace/name", attribute: vmAttributePath}

// addWaitError explains why a wait for t ended without the target state.
func (r *vmResource) addWaitError(diags *diag.Diagnostics, err error, id string, t waitTarget, timeout time.Duration, op string) {
	r.addWaitFailure(diags, err, id, waitFailure{
		want: targetDescription(t), slow: "the guest needs", stuck: "cannot reach its run strategy's state",
	}, timeout, op)
}

// addIPWaitError explains why wait_for_ip ended without an address.
func (r *vmResource) addIPWaitError(diags *diag.Diagnostics, err error, id, op string) {
	switch {
	case errors.Is(err, errIPTimeout):
		diags.AddError("Timed out waiting for an IP address of virtual machine "+id,
			strings.TrimPrefix(err.Error(), errIPTimeout.Error()+": ")+". The VM runs; check the guest's network "+
				"configuration (a DHCP client on the interface) and the node's network, or raise wait_for_ip.timeout "+
				"(and timeouts."+op+") if the guest needs longer.")
	case status.Code(err) == codes.NotFound:
		diags.AddError("Virtual machine "+id+" disappeared",
			"The VM was deleted by someone else while Terraform waited for its IP address.")
	case status.Code(err) != codes.Unknown:
		r.addError(diags, err, "wait for an IP address of virtual machine "+id)
	default:
		diags.AddError("Virtual machine "+id+" cannot get an IP address",
			fmt.Sprintf("Waiting for an IP address of %s stopped early: %s.", id, err))
	}
}
