package nodeagent

import (
	"context"
	"errors"
	"fmt"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/adoption"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/launchers"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/vmistatus"
)

// Adopting libvirt domains (docs/adopt.md, package adoption): the
// handler's part is the first instance of an adopted VM, whose record
// names the domain to take over (state.VMI.AdoptedUUID) instead of a
// domain to define.

// ReasonAdoptionFailed fails an instance that was to take over an
// adopted domain and may not.
const ReasonAdoptionFailed = "AdoptionFailed"

// ReasonAdopted is why an instance that runs an adopted domain is not
// live-migratable: its disks are still the domain's files.
const ReasonAdopted = "Adopted"

// adoptionClaims is what the handler needs of the adoption role.
type adoptionClaims interface {
	Claim(ctx context.Context, vmi *apiv1.VirtualMachineInstance, vmUID string) (*adoption.Claim, error)
	TookOver(vmUID, vmiUID string, qemuPid int) error
	TakeOverFailed(vmUID, vmiUID, reason string) error
}

// newAdoptionRole makes the adoption role when the agent takes part in
// adoptions (Options.API.Adoptions); the handler and the disks room are
// given it after (adoptedSources).
func (a *Agent) newAdoptionRole() {
	o := a.opts
	if o.API.Adoptions == nil {
		return
	}
	a.adoptions = adoption.New(adoption.Options{
		NodeName: o.NodeName, API: o.API.Adoptions, Inspect: inspector{o}, Files: disks.QemuImg{},
		Layout: a.layout, Dirs: o.AdoptDirs, ImageDir: o.ImageDir, NVRAMDirs: o.AdoptNVRAMDirs,
		CallTimeout: o.Timing.CallTimeout, Logger: a.log,
	})
}

// adoptedSources are the files adopted VMs copy their volumes from, nil
// when the agent adopts nothing.
func (a *Agent) adoptedSources() disks.AdoptedSources {
	if a.adoptions == nil {
		return nil
	}
	return a.adoptions
}

// inspector runs the launcher binary's inspect-domain on the node's
// libvirtd, with the launchers' QEMU pid directory (a libvirtd in a
// private mount namespace writes its pid files elsewhere than the
// default).
type inspector struct{ o Options }

func (i inspector) InspectDomain(ctx context.Context, name string) (launcher.DomainFacts, error) {
	return launcher.InspectDomain(ctx, ExecTools{Path: i.o.LauncherPath}.path(), i.o.LibvirtURI, i.o.QEMUPidDir, name)
}

// claimAdopted gives a new record of an adopted VM's first instance the
// domain to take over. done: the pass ends (the instance failed).
func (h *handler) claimAdopted(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI) (controller.Result, bool, error) {
	if h.adopt == nil || apiv1.AdoptionOf(vmi.GetMetadata()) == "" {
		return controller.Result{}, false, nil
	}
	c, err := h.adopt.Claim(ctx, vmi, rec.VMUID)
	if refused, ok := errors.AsType[*adoption.RefusedError](err); ok {
		h.log.Warn("failing an instance that may not take over its adopted domain", "vmi", informer.Key(vmi), "err", err)
		return controller.Result{}, true, h.status.Report(ctx, vmi, vmistatus.Final(apiv1.PhaseFailed, ReasonAdoptionFailed, refused.Reason))
	}
	if err != nil {
		return controller.Result{}, true, fmt.Errorf("claiming the adopted domain of %s: %w", informer.Key(vmi), err)
	}
	if c != nil {
		rec.DomainName, rec.AdoptedUUID = c.Domain, c.UUID
	}
	return controller.Result{}, false, nil
}

// adoptedOptions are the Sync options of an instance that takes over its
// adopted domain: the domain as it is (no disks, no kernel: nothing is
// defined), and the console log in the instance's directory, which its
// launcher fills from the domain's serial pty.
func (h *handler) adoptedOptions(rec *state.VMI) (*launcherpb.SyncOptions, error) {
	if err := h.layout.CheckVMIDir(rec.UID, rec.Dir); err != nil {
		return nil, err
	}
	if err := nodedir.MkdirTraversable(rec.Dir); err != nil {
		return nil, fmt.Errorf("creating %s: %w", rec.Dir, err)
	}
	return &launcherpb.SyncOptions{
		ConsoleLogPath: nodedir.ConsoleLogPath(rec.Dir), DomainName: rec.DomainName,
		Kvm: h.host.KVMUsable, NodeFailurePolicy: rec.NodeFailurePolicy,
		Adopt: &launcherpb.AdoptedDomain{Uuid: rec.AdoptedUUID},
	}, nil
}

// tookOver tells the adoption role how the take-over's Sync went.
func (h *handler) tookOver(rec *state.VMI, dom *launcherpb.DomainStatus, syncErr error) {
	if h.adopt == nil || rec.AdoptedUUID == "" {
		return
	}
	var err error
	if syncErr != nil {
		err = h.adopt.TakeOverFailed(rec.VMUID, rec.UID, launchers.ErrorMessage(syncErr))
	} else {
		err = h.adopt.TookOver(rec.VMUID, rec.UID, int(dom.GetQemuPid()))
	}
	if err != nil {
		h.log.Warn("recording the take-over of an adopted domain", "vmi", rec.Key(), "err", err)
	}
}

// notTakenOver is dom as the handler sees it: an adopted domain that the
// instance has not taken over yet (no metadata of its own) is not the
// instance's, as if there were none. The handler then never shuts down,
// kills or undefines a domain it did not take over (a take-over that
// failed leaves it as it was); the take-over itself is Sync's.
func notTakenOver(rec *state.VMI, dom *launcherpb.DomainStatus) *launcherpb.DomainStatus {
	if rec.AdoptedUUID == "" || !dom.GetExists() || dom.GetVmiUid() == rec.UID {
		return dom
	}
	return &launcherpb.DomainStatus{Name: dom.GetName()}
}

// liveMigratable is the instance's LiveMigratable condition: an adopted
// domain's disks are the domain's own files until the VM's first start
// through virtplane, and do not move.
func liveMigratable(vmi *apiv1.VirtualMachineInstance, rec *state.VMI) *apiv1.Condition {
	if rec != nil && rec.AdoptedUUID != "" {
		return &apiv1.Condition{Type: apiv1.ConditionLiveMigratable, Status: apiv1.ConditionFalse, Reason: ReasonAdopted,
			Message: "the instance runs an adopted domain on its own disk files: it migrates after the VM's first stop and start through virtplane"}
	}
	return apiv1.LiveMigratable(vmi.GetSpec())
}
