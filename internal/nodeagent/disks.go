package nodeagent

import (
	"context"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/imagepull"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/migration"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/vmistatus"
)

// diskRoom is what the handler and the migration target need of package
// disks: a VMI's files laid out, as the options its domain is built from
// (for a migration target: blank volumes to copy into). An error the VMI
// should show is a *disks.Error.
type diskRoom interface {
	Prepare(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI) (*launcherpb.SyncOptions, error)
	// GrowVolumes grows the VMI's persistent volumes that are smaller
	// than their sizes; no QEMU may have them open.
	GrowVolumes(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI) error
	migration.Disks
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

// diskProgress shows slow steps on the VMI: the disk room's, and the
// image pulls an instance waits for.
type diskProgress struct{ status *vmistatus.Writer }

var (
	_ disks.Progress     = diskProgress{}
	_ imagepull.Reporter = diskProgress{}
)

func (p diskProgress) Provisioning(ctx context.Context, vmi *apiv1.VirtualMachineInstance, msg string) error {
	return p.status.Report(ctx, vmi, vmistatus.Provisioning(msg))
}
