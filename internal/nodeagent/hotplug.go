package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/imagepull"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/launchers"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/vmistatus"
)

// Hotplug, the node's part (KubeVirt's virt-handler hotplug volume
// handling; docs/hotplug.md): the VM controller changes a running
// instance's hotpluggable disks (validation.LiveDisks); here the node
// makes the volume of a disk added (Prepare, on any storage class, as at
// a start), has the launcher plug it in, has it unplug a disk removed,
// and reports each hotpluggable volume in status.volume_status. The
// volume of a disk removed is kept: it is the VM's until the VM is
// deleted, as KubeVirt keeps an unplugged volume's PVC.

// Defaults of the Timing fields of hotplug.
const (
	// DefaultDetachWait is how long one pass waits for the guest to
	// release an unplugged disk before it reports it Detaching and looks
	// again later (libvirt's device-removed event brings it back sooner).
	DefaultDetachWait = 5 * time.Second
	// DefaultDetachTimeout is how long a guest may hold an unplugged
	// disk before the volume status says it does not release it.
	DefaultDetachTimeout = 30 * time.Second
	// hotplugRetry is when a pass whose hotplug is not settled (a disk
	// detaching, a plug that failed) looks again first; each further
	// unsettled pass for the same disks doubles it, up to
	// hotplugRetryMax, so that a plug that keeps failing (its storage
	// unreachable, a disk the guest never releases) costs a launcher call
	// every few minutes, not every few seconds. A change of the disks
	// and libvirt's device-removed event still bring the instance back
	// at once.
	hotplugRetry    = 5 * time.Second
	hotplugRetryMax = 5 * time.Minute
)

// hotplugBackoff is how long the pass after the n-th unsettled one in a
// row waits (n >= 1).
func hotplugBackoff(n int) time.Duration {
	d := hotplugRetry
	for i := 1; i < n && d < hotplugRetryMax; i++ {
		d *= 2
	}
	return min(d, hotplugRetryMax)
}

// unsettled counts one more hotplug pass of the disks fp that left a
// volume not Ready and sets the pass's requeue by it.
func unsettled(p *updatePass, fp string) {
	h := &p.e.Hotplug
	if h.Disks != fp {
		*h = launchers.HotplugState{Disks: fp}
	}
	h.Settled = false
	h.Retries++
	p.requeue = hotplugBackoff(h.Retries)
}

// hotplugFingerprint is what of a VMI's spec the hotplug step acts on:
// its disks, by name, and which are hotpluggable. "" for an instance
// without hotpluggable volumes.
func hotplugFingerprint(vmi *apiv1.VirtualMachineInstance) string {
	hot := apiv1.HotpluggableVolumes(vmi.GetSpec())
	if len(hot) == 0 {
		return ""
	}
	var b strings.Builder
	for _, d := range vmi.GetSpec().GetDomain().GetDevices().GetDisks() {
		b.WriteString(d.GetName())
		if hot[d.GetName()] {
			b.WriteByte('*')
		}
		b.WriteByte(',')
	}
	return b.String()
}

// settled reports whether every volume status is Ready.
func settled(st []*apiv1.VolumeStatus) bool {
	for _, s := range st {
		if s.GetPhase() != apiv1.VolumeReady {
			return false
		}
	}
	return true
}

// hotplug plugs and unplugs the running instance's hotpluggable disks as
// its spec says and leaves their statuses in the pass for reportRunning
// to write with the rest. It never fails the pass: what went wrong is in
// the statuses, and the pass comes back. It runs when the spec's disks
// changed since this launcher connection last settled them, and while
// a volume is not Ready; an instance without hotpluggable volumes costs
// nothing.
func (h *handler) hotplug(ctx context.Context, p *updatePass) (controller.Result, bool, error) {
	fp := hotplugFingerprint(p.vmi)
	current := p.vmi.GetStatus().GetVolumeStatus()
	if (fp == "" && len(current) == 0) || (p.e.Hotplug.Settled && fp == p.e.Hotplug.Disks && settled(current)) {
		return controller.Result{}, false, nil
	}
	if apiv1.MigrationInFlight(p.vmi) {
		// The target made what the instance had; the VM controller holds
		// the spec still meanwhile, and the migration's end brings the
		// instance back here.
		return controller.Result{}, false, nil
	}
	live, err := h.liveDisks(ctx, p.e)
	if err != nil {
		h.log.Info("hotplug: the domain's disks cannot be read now", "vmi", p.key, "err", err)
		unsettled(p, fp)
		return controller.Result{}, false, nil
	}
	st := h.plugDisks(ctx, p, live)
	st = append(st, h.unplugDisks(ctx, p, live)...)
	p.volumes, p.volumesSet = st, true
	if settled(st) {
		p.e.Hotplug = launchers.HotplugState{Disks: fp, Settled: true}
	} else {
		unsettled(p, fp)
	}
	return controller.Result{}, false, nil
}

// liveDisks are the running domain's disks by name.
func (h *handler) liveDisks(ctx context.Context, e *launchers.Conn) (map[string]*launcherpb.DiskAttachment, error) {
	cctx, cancel := context.WithTimeout(ctx, h.timing.CallTimeout)
	defer cancel()
	l, err := e.Client.Disks(cctx)
	if err != nil {
		return nil, err
	}
	out := map[string]*launcherpb.DiskAttachment{}
	for _, d := range l.GetDisks() {
		out[d.GetName()] = d
	}
	return out, nil
}

// plugDisks plugs the spec's hotpluggable disks the domain lacks, and
// returns the status of each, in the spec's order.
func (h *handler) plugDisks(ctx context.Context, p *updatePass, live map[string]*launcherpb.DiskAttachment) []*apiv1.VolumeStatus {
	hot := apiv1.HotpluggableVolumes(p.vmi.GetSpec())
	var out []*apiv1.VolumeStatus
	var opts *launcherpb.SyncOptions
	var prepErr error
	for _, d := range p.vmi.GetSpec().GetDomain().GetDevices().GetDisks() {
		name := d.GetName()
		if !hot[name] {
			continue
		}
		if a := live[name]; a != nil && a.GetDetachRequestedUnixMillis() == 0 {
			out = append(out, &apiv1.VolumeStatus{Name: name, Phase: apiv1.VolumeReady, Target: a.GetTarget()})
			continue
		}
		if opts == nil && prepErr == nil {
			// Made as at a start, on whichever class (a file, an rbd
			// image cloned or blank, a file on a shared filesystem).
			opts, prepErr = h.hotplugOptions(ctx, p)
		}
		if prepErr != nil {
			out = append(out, &apiv1.VolumeStatus{Name: name, Phase: apiv1.VolumePending, Reason: apiv1.ReasonAttachFailed,
				Message: "making the volume: " + prepErr.Error()})
			continue
		}
		out = append(out, h.plugDisk(ctx, p, opts, name, live[name]))
	}
	return out
}

// hotplugOptions are the instance's disks as its node prepares them (the
// Sync of this pass's, when it ran).
func (h *handler) hotplugOptions(ctx context.Context, p *updatePass) (*launcherpb.SyncOptions, error) {
	if p.opts != nil {
		return p.opts, nil
	}
	opts, err := h.syncOptions(ctx, p.vmi, p.rec)
	if w := (*imagepull.Wait)(nil); errors.As(err, &w) {
		if w.Cause != nil {
			return nil, fmt.Errorf("waiting for its image: %w", w.Cause)
		}
		return nil, errors.New("waiting for its image to be pulled")
	}
	return opts, err
}

// plugDisk plugs disk name (from opts) into the domain.
func (h *handler) plugDisk(ctx context.Context, p *updatePass, opts *launcherpb.SyncOptions, name string, cur *launcherpb.DiskAttachment) *apiv1.VolumeStatus {
	i := slices.IndexFunc(opts.GetDisks(), func(s *launcherpb.DiskSource) bool { return s.GetName() == name })
	if i < 0 {
		return &apiv1.VolumeStatus{Name: name, Phase: apiv1.VolumePending, Reason: apiv1.ReasonAttachFailed,
			Message: "the node prepared no disk of this name"}
	}
	if cur != nil {
		// Unplugged and added again before the guest let go of it.
		return &apiv1.VolumeStatus{Name: name, Phase: apiv1.VolumeAttachedToNode, Target: cur.GetTarget(), Reason: apiv1.ReasonDetachPending,
			Message: "the guest has not released the disk from its unplug yet; it is plugged in again once it has"}
	}
	cctx, cancel := context.WithTimeout(ctx, h.timing.CallTimeout)
	defer cancel()
	a, err := p.e.Client.AttachDisk(cctx, &launcherpb.AttachDiskRequest{Disk: opts.GetDisks()[i], CephSecrets: opts.GetCephSecrets()})
	if err != nil {
		h.log.Warn("hotplug: plugging a disk failed", "vmi", p.key, "disk", name, "err", err)
		return &apiv1.VolumeStatus{Name: name, Phase: apiv1.VolumeAttachedToNode, Reason: apiv1.ReasonAttachFailed,
			Message: launchers.ErrorMessage(err)}
	}
	h.log.Info("hotplug: disk plugged into the running guest", "vmi", p.key, "disk", name, "target", a.GetTarget())
	return &apiv1.VolumeStatus{Name: name, Phase: apiv1.VolumeReady, Target: a.GetTarget()}
}

// unplugDisks unplugs the domain's disks the spec no longer has, and
// returns the status of those the guest has not released yet.
func (h *handler) unplugDisks(ctx context.Context, p *updatePass, live map[string]*launcherpb.DiskAttachment) []*apiv1.VolumeStatus {
	inSpec := map[string]bool{}
	for _, d := range p.vmi.GetSpec().GetDomain().GetDevices().GetDisks() {
		inSpec[d.GetName()] = true
	}
	var gone []string
	for name := range live {
		if !inSpec[name] {
			gone = append(gone, name)
		}
	}
	slices.Sort(gone)
	var out []*apiv1.VolumeStatus
	for _, name := range gone {
		if s := h.unplugDisk(ctx, p, name, live[name]); s != nil {
			out = append(out, s)
		}
	}
	return out
}

// unplugDisk asks the guest to release disk name and waits a while;
// nil once it is gone.
func (h *handler) unplugDisk(ctx context.Context, p *updatePass, name string, cur *launcherpb.DiskAttachment) *apiv1.VolumeStatus {
	wait := h.timing.DetachWait
	cctx, cancel := context.WithTimeout(ctx, h.timing.CallTimeout+wait)
	defer cancel()
	a, err := p.e.Client.DetachDisk(cctx, &launcherpb.DetachDiskRequest{Name: name, WaitMillis: wait.Milliseconds()})
	if err != nil {
		h.log.Warn("hotplug: unplugging a disk failed", "vmi", p.key, "disk", name, "err", err)
		return &apiv1.VolumeStatus{Name: name, Phase: apiv1.VolumeDetaching, Target: cur.GetTarget(), Reason: apiv1.ReasonDetachPending,
			Message: "asking the guest to release the disk: " + launchers.ErrorMessage(err)}
	}
	if !a.GetAttached() {
		h.log.Info("hotplug: disk unplugged from the running guest", "vmi", p.key, "disk", name, "target", cur.GetTarget())
		return nil
	}
	s := &apiv1.VolumeStatus{Name: name, Phase: apiv1.VolumeDetaching, Target: a.GetTarget(), Reason: apiv1.ReasonDetachPending,
		Message: "asked the guest to release the disk; waiting for it"}
	if asked := a.GetDetachRequestedUnixMillis(); asked != 0 {
		if held := h.now().Sub(time.UnixMilli(asked)); held >= h.timing.DetachTimeout {
			s.Reason = apiv1.ReasonDetachTimeout
			s.Message = fmt.Sprintf("the guest has not released the disk (%s) for %s: it may not support unplugging it, or it is in use; "+
				"it stays in the guest until the guest lets it go or the VM restarts", a.GetTarget(), held.Round(time.Second))
		}
	}
	return s
}

// withVolumeStatus is the status mutation that writes the pass's volume
// statuses, when the hotplug step made them.
func (p *updatePass) withVolumeStatus(m vmistatus.Mutate) vmistatus.Mutate {
	if !p.volumesSet {
		return m
	}
	return func(st *apiv1.VirtualMachineInstanceStatus, now time.Time) {
		m(st, now)
		st.VolumeStatus = p.volumes
	}
}
