package driver

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
)

// Sync is KubeVirt's SyncVirtualMachine: adopt or define the domain, start
// it if it is down and the VMI has not run yet, resume it if something
// other than the user paused it, and give a running domain the port
// forwards and VLANs libvirt cannot (applyNetwork) and the disk sizes the
// node agent asks for (growDisks). Calling it again changes nothing.
func (d *Driver) Sync(ctx context.Context, req *launcherpb.SyncRequest) (*launcherpb.DomainStatus, error) {
	if err := ctx.Err(); err != nil {
		return nil, status.FromContextError(err).Err()
	}
	vmi := req.GetVmi()
	uid := vmi.GetMetadata().GetUid()
	if uid == "" {
		return nil, status.Error(codes.InvalidArgument, "sync: vmi.metadata.uid is required")
	}
	opts := proto.Clone(req.GetOptions()).(*launcherpb.SyncOptions)
	if opts == nil {
		opts = &launcherpb.SyncOptions{}
	}
	switch opts.GetDomainName() {
	case "":
		opts.DomainName = d.cfg.DomainName
	case d.cfg.DomainName:
	default:
		return nil, status.Errorf(codes.InvalidArgument, "sync: this launcher manages domain %s, not %s", d.cfg.DomainName, opts.GetDomainName())
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.uid == "" {
		d.uid = uid
	} else if d.uid != uid {
		return nil, status.Errorf(codes.InvalidArgument, "sync: this launcher serves VMI uid %s, not %s", d.uid, uid)
	}
	if err := d.setNetSpec(vmi.GetSpec()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "sync: %v", err)
	}

	// Every Sync: libvirt forgets ephemeral secrets when it restarts, and a
	// domain that stopped needs them to start again.
	if err := d.setSecrets(opts); err != nil {
		return nil, err
	}
	dom, err := d.lookup()
	if err != nil {
		return nil, err
	}
	var md domxml.Metadata
	if dom == nil {
		if opts.GetAdopt() != nil {
			// Never a new domain in place of one to take over.
			return nil, status.Errorf(codes.FailedPrecondition, "sync: the domain %s to take over is gone", d.cfg.DomainName)
		}
		if dom, err = d.define(vmi, opts); err != nil {
			return nil, err
		}
		md, _, err = readMetadata(dom)
	} else {
		md, err = d.adopt(dom, vmi, opts)
	}
	if err != nil {
		dom.Free()
		return nil, grpcError(err)
	}
	defer dom.Free()
	d.focusEvents(true)
	d.policy.remember(md)

	if !md.FencedOnLeaseExpiry() {
		// A watchdog armed before the policy was known (a new launcher is
		// renewed before its first Sync) must not outlive that knowledge.
		d.lease.renew(0)
	}
	started, err := d.converge(dom, vmi, md, startBoundOf(opts))
	if err != nil {
		return nil, err
	}
	if err := d.growDisks(dom, opts.GetDisks()); err != nil {
		return nil, err
	}
	if md.Adopted {
		d.copyConsole(dom, opts.GetConsoleLogPath())
	}
	if err := d.applyNetwork(dom, allNetSteps); err != nil {
		return nil, d.networkFailed(dom, started, err)
	}
	d.kickAddresses()
	return d.statusOf(dom)
}

// networkFailed reports a network that could not be applied. A guest
// this Sync started is destroyed first: it would run without the VLAN
// or port forwards it was given (the node agent fails the instance with
// the message). One that ran before (a launcher back after a restart)
// keeps running; the node agent shows the error and syncs again.
func (d *Driver) networkFailed(dom Domain, started bool, err error) error {
	if started {
		d.log.Warn("destroying the domain just started: its network could not be set up", "err", err)
		if derr := dom.Destroy(false); derr != nil {
			d.log.Warn("destroying the domain after the network failed", "err", derr)
		}
	}
	return status.Errorf(codes.FailedPrecondition, "network: %v", err)
}

func (d *Driver) define(vmi *apiv1.VirtualMachineInstance, opts *launcherpb.SyncOptions) (Domain, error) {
	def, err := domxml.Build(vmi, opts)
	if err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "sync: build domain: %v", err)
	}
	xml, err := def.Marshal()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "sync: marshal domain: %v", err)
	}
	dom, err := d.conn.DomainDefineXML(xml)
	if err != nil {
		return nil, grpcError(fmt.Errorf("define domain %s: %w", d.cfg.DomainName, err))
	}
	if dom, err = d.withHotplugPorts(dom); err != nil {
		return nil, err
	}
	d.log.Info("defined domain", "vmi_uid", vmi.GetMetadata().GetUid(), "kvm", opts.GetKvm())
	return dom, nil
}

// withHotplugPorts defines dom again with domxml.HotplugPorts free PCIe
// root ports, for disks plugged while it runs: libvirt gives a new
// definition the ports its devices take and no more, and their addresses
// only once it is defined, so this is a second definition of what libvirt
// made of the first (KubeVirt's way too).
func (d *Driver) withHotplugPorts(dom Domain) (Domain, error) {
	x, err := dom.GetXMLDesc()
	if err != nil {
		dom.Free()
		return nil, grpcError(fmt.Errorf("read the defined domain %s: %w", d.cfg.DomainName, err))
	}
	more, added, err := domxml.WithHotplugPorts(x, domxml.HotplugPorts)
	if err != nil {
		dom.Free()
		return nil, status.Errorf(codes.Internal, "sync: %v", err)
	}
	if added == 0 {
		return dom, nil
	}
	dom.Free()
	if dom, err = d.conn.DomainDefineXML(more); err != nil {
		return nil, grpcError(fmt.Errorf("define domain %s with ports for hotplug: %w", d.cfg.DomainName, err))
	}
	return dom, nil
}

// adopt takes over a domain that already exists — left by a launcher that
// died, or by this one before a node-agent restart — if it is this VMI's.
func (d *Driver) adopt(dom Domain, vmi *apiv1.VirtualMachineInstance, opts *launcherpb.SyncOptions) (domxml.Metadata, error) {
	if a := opts.GetAdopt(); a != nil {
		if err := d.takeOver(dom, vmi, opts, a); err != nil {
			return domxml.Metadata{}, err
		}
	}
	md, err := d.owned(dom)
	if err != nil {
		return md, err
	}
	// The grace period and the node failure policy live in the domain so
	// that they outlive the VMI object and the API; keep them current (a
	// domain defined before the policy was recorded gets it here).
	changed := false
	if g := vmi.GetSpec().GracePeriodSeconds(); md.GracePeriodSeconds != g {
		md.GracePeriodSeconds, changed = g, true
	}
	if p := opts.GetNodeFailurePolicy(); p != "" && md.NodeFailurePolicy != p {
		md.NodeFailurePolicy, changed = p, true
	}
	if changed {
		if err := writeMetadata(dom, md); err != nil {
			return md, err
		}
	}
	return md, nil
}

// converge starts (within b) or resumes the domain as the VMI requires;
// started says it started it.
func (d *Driver) converge(dom Domain, vmi *apiv1.VirtualMachineInstance, md domxml.Metadata, b startBound) (started bool, err error) {
	st, reason, err := dom.GetState()
	if err != nil {
		return false, grpcError(fmt.Errorf("get domain state: %w", err))
	}
	switch {
	case st == StateShutoff || st == StateCrashed:
		// KubeVirt starts a down domain only while the VMI has not run:
		// a Running VMI whose domain is down has ended (its guest powered
		// off or crashed) and must become Succeeded or Failed, not boot
		// again behind the control plane's back.
		phase := vmi.GetStatus().GetPhase()
		if phase == apiv1.PhaseRunning || apiv1.IsFinal(phase) {
			return false, nil
		}
		return true, d.start(dom, vmi, md, b)
	case st == StatePaused && !md.PausedByUser:
		if err := dom.Resume(); err != nil {
			return false, grpcError(fmt.Errorf("resume domain: %w", err))
		}
		d.log.Info("resumed domain not paused by the user", "reason", ReasonName(st, reason))
	}
	return false, nil
}

func (d *Driver) start(dom Domain, vmi *apiv1.VirtualMachineInstance, md domxml.Metadata, b startBound) error {
	// A new boot: forget the previous run's shutdown request. spec.paused
	// ("start --paused") boots into the paused state and counts as a user
	// pause, so Sync will not resume it.
	paused := vmi.GetSpec().GetPaused()
	if md.ShutdownRequestedAt != 0 || md.PausedByUser != paused {
		md.ShutdownRequestedAt = 0
		md.PausedByUser = paused
		if err := writeMetadata(dom, md); err != nil {
			return grpcError(err)
		}
	}
	if err := d.create(dom, paused, b); err != nil {
		return err
	}
	d.log.Info("started domain", "paused", paused)
	return nil
}
