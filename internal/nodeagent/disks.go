package nodeagent

import (
	"context"
	"errors"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// diskRoom is what the handler needs of package disks: a VMI's files
// laid out, as the options its domain is built from. An error the VMI
// should show is a *disks.Error.
type diskRoom interface {
	Prepare(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI) (*launcherpb.SyncOptions, error)
}

// imageList is what registration and heartbeats need of the node's image
// inventory (package disks), which lists the image directory on its own
// (Run) so that hashing never holds up a heartbeat.
type imageList interface {
	Run(ctx context.Context)
	// ForRegister waits up to wait for the first listing.
	ForRegister(ctx context.Context, wait time.Duration) *apiv1.NodeImageList
	// Pending is the list the server does not have yet, or nil.
	Pending() *apiv1.NodeImageList
	MarkSent(l *apiv1.NodeImageList)
	// Changed is signalled when a list becomes pending.
	Changed() <-chan struct{}
	// Refresh asks for a listing soon (an image was pulled or removed).
	Refresh()
}

// syncOptions prepares the VMI's files and completes the options its
// domain is built from with what the agent knows.
func (a *Agent) syncOptions(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI) (*launcherpb.SyncOptions, error) {
	if err := a.pullImages(ctx, vmi); err != nil {
		return nil, err
	}
	opts, err := a.disks.Prepare(ctx, vmi, rec)
	if err != nil {
		return nil, err
	}
	opts.Kvm = a.host.KVMUsable
	opts.DomainName = rec.DomainName
	// Recorded in the domain, so the launcher's lease watchdog never
	// fences a Wait domain, whoever arms it.
	opts.NodeFailurePolicy = rec.NodeFailurePolicy
	return opts, nil
}

// diskProgress shows the disk room's slow steps on the VMI.
type diskProgress struct{ a *Agent }

var _ disks.Progress = diskProgress{}

func (p diskProgress) Provisioning(ctx context.Context, vmi *apiv1.VirtualMachineInstance, msg string) error {
	if _, err := p.a.writeStatus(ctx, vmi, provisioningStatus(msg)); err != nil && !errors.Is(err, errVMIGone) {
		return err
	}
	return nil
}
