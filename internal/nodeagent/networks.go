package nodeagent

import (
	"context"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/netinventory"
)

// networkList is what registration and heartbeats need of the node's
// network inventory (package netinventory), which lists bridges and
// libvirt networks on its own (Run): the networks take a launcher process,
// which must never hold up a heartbeat.
type networkList interface {
	Run(ctx context.Context)
	// ForRegister waits up to wait for the first listing.
	ForRegister(ctx context.Context, wait time.Duration) *apiv1.NodeNetworkInventory
	// Pending is the inventory the server does not have yet, or nil.
	Pending() *apiv1.NodeNetworkInventory
	MarkSent(l *apiv1.NodeNetworkInventory)
	// Changed is signalled when an inventory becomes pending.
	Changed() <-chan struct{}
}

// newNetworkInventory lists the bridges of opts.BridgeNetNS and the
// libvirt networks of opts.LibvirtURI, through the launcher tools.
func newNetworkInventory(opts Options, a *Agent) networkList {
	bridges := opts.ListBridges
	if bridges == nil {
		bridges = func(context.Context) ([]string, error) { return netinventory.ListBridges(bridgeNetNS(opts)) }
	}
	return netinventory.New(netinventory.Options{
		Bridges: bridges,
		Networks: func(ctx context.Context) ([]string, error) {
			nets, err := opts.Tools.ListNetworks(ctx, opts.LibvirtURI)
			if err != nil {
				return nil, err
			}
			names := make([]string, len(nets))
			for i, n := range nets {
				names[i] = n.Name
			}
			return names, nil
		},
		RefreshPeriod: opts.Timing.NetworkRefreshPeriod,
		Clock:         opts.Clock,
		Logger:        a.log,
	})
}

// bridgeNetNS is the namespace whose bridges the node offers: the one
// configured, else that of the libvirt daemon behind the node's URI
// (found again at every listing: the daemon may restart), else the
// agent's own. QEMU's taps live in the daemon's namespace, which on a
// host is the agent's too; in the multi-node harness each node's daemon
// has its own.
func bridgeNetNS(opts Options) string {
	ns, err := qemuNetNS(opts)
	if err != nil {
		return "" // remote or not running: the agent's own namespace
	}
	return ns
}
