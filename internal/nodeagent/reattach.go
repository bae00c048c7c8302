package nodeagent

import (
	"context"
	"fmt"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
)

// restore reconnects to the launchers of the previous run (Nomad's
// RecoverTask): a reattached launcher is used as it is, so its guest is
// not touched. One that is gone is left to the handler, which starts a new
// launcher that adopts the running domain.
func (a *Agent) restore(ctx context.Context) error {
	recs, err := a.db.ListVMIs()
	if err != nil {
		return fmt.Errorf("reading state records: %w", err)
	}
	for _, rec := range recs {
		if !rec.HasLauncher() {
			continue
		}
		if err := a.launchers.Reattach(ctx, rec); err != nil {
			a.log.Info("launcher of the previous run is gone; a new one will adopt the domain",
				"vmi", rec.Key(), "pid", rec.Handle.Pid, "err", err)
			continue
		}
		a.log.Info("reattached to launcher", "vmi", rec.Key(), "pid", rec.Handle.Pid)
	}
	return nil
}

// fenceIfLeaseExpired is the fail-safe restart of docs/failover.md: an
// agent that starts after its last lease ended destroys its
// RestartElsewhere domains before it registers or heartbeats again, since
// the control plane may already have failed them over.
func (a *Agent) fenceIfLeaseExpired(ctx context.Context) {
	n, err := a.db.GetNode()
	if err != nil {
		a.log.Error("reading the last lease; not fencing", "err", err)
		return
	}
	if n.LeaseExpiry.IsZero() || a.now().Before(n.LeaseExpiry) {
		return
	}
	recs, err := a.db.ListVMIs()
	if err != nil {
		a.log.Error("reading state records; not fencing", "err", err)
		return
	}
	for _, rec := range recs {
		if rec.NodeFailurePolicy != apiv1.NodeFailurePolicyRestartElsewhere {
			continue
		}
		a.log.Warn("the node lease expired while the agent was down: destroying RestartElsewhere domain",
			"vmi", rec.Key(), "lease_expired", n.LeaseExpiry)
		e, err := a.launchers.Ensure(ctx, nil, rec)
		if err != nil {
			a.log.Error("fencing: no launcher", "vmi", rec.Key(), "err", err)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, a.opts.Timing.CallTimeout)
		if _, err := e.Client.Kill(cctx); err != nil {
			a.log.Error("fencing: kill failed", "vmi", rec.Key(), "err", err)
		}
		cancel()
	}
}

// cleanupOrphans removes the domains virtplane defined for this node that
// belong to nothing: no state record and no VMI placed here. Domains of a
// VMI placed here without a record (a lost state database) are left for
// the handler, whose new launcher adopts them by name and VMI uid.
//
// Only domains whose metadata names this node count: libvirtd may be
// shared with another node agent (two node names on one host, parallel
// test runs), whose guests are not ours to destroy.
func (a *Agent) cleanupOrphans(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	doms, err := a.opts.Tools.ListDomains(lctx, a.opts.LibvirtURI)
	cancel()
	if err != nil {
		a.log.Warn("listing domains failed; orphans are not cleaned up", "err", err)
		return
	}
	recs, err := a.db.ListVMIs()
	if err != nil {
		a.log.Error("reading state records; orphans are not cleaned up", "err", err)
		return
	}
	known := map[string]bool{}
	for _, r := range recs {
		known["uid/"+r.UID], known["name/"+r.DomainName] = true, true
	}
	for _, v := range append(a.vmis.List(), a.targets.List()...) {
		known["uid/"+v.GetMetadata().GetUid()] = true
	}
	for _, d := range doms {
		if (d.VMIUID != "" && known["uid/"+d.VMIUID]) || known["name/"+d.Name] {
			continue
		}
		if d.Node != a.opts.NodeName {
			a.log.Debug("leaving a domain of another node alone", "domain", d.Name, "domain_node", d.Node)
			continue
		}
		a.log.Warn("cleaning up orphan domain", "domain", d.Name, "vmi_uid", d.VMIUID, "state", d.State)
		if err := a.destroyOrphan(ctx, d); err != nil {
			a.log.Error("cleaning up orphan domain failed", "domain", d.Name, "err", err)
		}
	}
}

// destroyOrphan kills and undefines a domain through a launcher of its
// own, which is stopped afterwards.
func (a *Agent) destroyOrphan(ctx context.Context, d launcher.DomainInfo) error {
	stub := &apiv1.VirtualMachineInstance{Metadata: &apiv1.ObjectMeta{
		Uid: d.VMIUID, Namespace: d.VMINamespace, Name: d.VMIName,
	}}
	c, _, err := a.opts.Launchers.Launch(ctx, stub, d.Name)
	if err != nil {
		return fmt.Errorf("launching: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, a.opts.Timing.CallTimeout)
	defer cancel()
	defer func() {
		if err := c.Stop(cctx); err != nil {
			a.log.Warn("stopping orphan's launcher failed", "domain", d.Name, "err", err)
		}
	}()
	if _, err := c.Kill(cctx); err != nil {
		return fmt.Errorf("killing: %w", err)
	}
	if _, err := c.Delete(cctx); err != nil {
		return fmt.Errorf("deleting: %w", err)
	}
	return nil
}
