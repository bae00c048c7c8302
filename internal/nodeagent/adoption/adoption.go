// Package adoption is the node's part of adopting libvirt domains that
// virtplane did not define (docs/adopt.md):
//
//  1. an adoption labelled with this node, Pending: the node inspects the
//     domain (through the launcher binary, which links libvirt), maps it
//     (package adopt, under the node's rules: its --adopt-dir directories
//     and image directory), checks each disk file (real path, regular
//     file, qemu-img's word on its format, size and chain) and the VM as
//     the API would, and reports Mapped or Refused with the spec, the
//     refusals and the notes;
//  2. the VM the controller made from it has its first instance placed
//     here: Claim maps the domain again, checks it is the one reported,
//     writes the node's record into the VM's directory and hands the
//     handler the domain's name and UUID, which its launcher takes over
//     without restarting the guest; TookOver reports Adopted;
//  3. at the VM's first start through virtplane after that, its volumes
//     are copied from the files the record names (Volume, NVRAM; package
//     disks does the copy).
//
// The node acts only on its own adoptions (the API holds it to the ones
// labelled with its name) and only on its own domains; nothing the API
// says becomes a path without the node's checks.
package adoption

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client/remotestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodework"
)

// API is the adoption service as the node uses it.
type API interface {
	remotestore.AdoptionWatcher
	Get(ctx context.Context, in *apiv1.GetAdoptionRequest, opts ...grpc.CallOption) (*apiv1.VirtualMachineAdoption, error)
	UpdateStatus(ctx context.Context, in *apiv1.UpdateAdoptionStatusRequest, opts ...grpc.CallOption) (*apiv1.VirtualMachineAdoption, error)
}

// Inspector reads a domain of the node's libvirtd (the launcher binary's
// inspect-domain).
type Inspector interface {
	InspectDomain(ctx context.Context, name string) (launcher.DomainFacts, error)
}

// Files reads a disk file as a given format (disks.QemuImg).
type Files interface {
	InfoAs(ctx context.Context, path, format string) (disks.FileInfo, error)
}

// DefaultNVRAMDir is where libvirt keeps the EFI variables of the domains
// it defines (qemu:///system): an adopted domain's are copied from there.
const DefaultNVRAMDir = "/var/lib/libvirt/qemu/nvram"

// Options configure a Role.
type Options struct {
	NodeName string
	API      API
	Inspect  Inspector
	Files    Files
	Layout   nodedir.Layout
	// Dirs are the directories disk files may be adopted from, resolved
	// (adopt.CheckDirs); none refuses every disk.
	Dirs []string
	// ImageDir is the node image directory.
	ImageDir string
	// NVRAMDirs are where an EFI variable store may be copied from,
	// besides Dirs; default DefaultNVRAMDir.
	NVRAMDirs []string
	// CallTimeout bounds an API call; InspectTimeout an inspection
	// (default a minute).
	CallTimeout, InspectTimeout time.Duration
	Logger                      *slog.Logger
}

// Role is the node's part of adoptions.
type Role struct {
	opts Options
	log  *slog.Logger
	work *nodework.Worker[*apiv1.VirtualMachineAdoption]
}

// New returns the role; Run starts it.
func New(opts Options) *Role {
	if opts.NVRAMDirs == nil {
		opts.NVRAMDirs = []string{DefaultNVRAMDir}
	}
	if opts.InspectTimeout == 0 {
		opts.InspectTimeout = time.Minute
	}
	r := &Role{opts: opts, log: opts.Logger.With("role", "adoption")}
	r.work = nodework.New(nodework.Options[*apiv1.VirtualMachineAdoption]{
		Name: "adoption", Kind: "adoption",
		Watch:    remotestore.NewAdoptions(opts.API),
		Selector: apiv1.LabelNodeName + "=" + opts.NodeName,
		Stops:    func(a *apiv1.VirtualMachineAdoption) bool { return a.GetMetadata().GetDeletionTimestamp() != nil },
		UpdateStatus: func(ctx context.Context, a *apiv1.VirtualMachineAdoption) (*apiv1.VirtualMachineAdoption, error) {
			return opts.API.UpdateStatus(ctx, &apiv1.UpdateAdoptionStatusRequest{Adoption: a})
		},
		InitStatus: func(a *apiv1.VirtualMachineAdoption) {
			if a.Status == nil {
				a.Status = &apiv1.VirtualMachineAdoptionStatus{}
			}
		},
		CallTimeout: opts.CallTimeout, Logger: r.log,
	})
	return r
}

// Run runs the informer and the worker in the background; the returned
// func stops them.
func (r *Role) Run(ctx context.Context) (stop func()) {
	return r.work.Run(ctx, 1, controller.ReconcileFunc(r.Reconcile))
}

// Reconcile does the node's step of one adoption of this node.
func (r *Role) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	a, ok := r.work.Inf.GetByKey(key)
	if !ok || a.GetMetadata().GetDeletionTimestamp() != nil {
		return controller.Result{}, nil
	}
	if r.work.Stale(a) {
		return controller.Result{}, nil // the watch brings the node's own write
	}
	if a.GetSpec().GetNodeName() != r.opts.NodeName {
		return controller.Result{}, nil // labelled for this node by the server from the spec: never
	}
	switch a.GetStatus().GetPhase() {
	case "", apiv1.AdoptionPending:
		return controller.Result{}, r.report(ctx, a)
	case apiv1.AdoptionAdopting:
		return controller.Result{}, r.reportTakeOver(ctx, a)
	}
	return controller.Result{}, nil
}

// report maps the domain and writes what was found.
func (r *Role) report(ctx context.Context, a *apiv1.VirtualMachineAdoption) error {
	ictx, cancel := context.WithTimeout(ctx, r.opts.InspectTimeout)
	m := r.mapDomain(ictx, a)
	cancel()
	phase := apiv1.AdoptionMapped
	if len(m.status.Refusals) > 0 {
		phase = apiv1.AdoptionRefused
	}
	_, err := r.work.WriteStatus(ctx, a, func(next *apiv1.VirtualMachineAdoption) {
		st := m.status
		st.Phase = phase
		next.Status = st
	})
	if err == nil {
		r.log.Info("domain mapped", "adoption", apiv1.Ref(a.GetMetadata().GetNamespace(), a.GetMetadata().GetName()),
			"domain", a.GetSpec().GetDomainName(), "phase", phase, "refusals", len(m.status.Refusals), "notes", len(m.status.Notes))
	}
	return err
}

// reportTakeOver reports, from the VM's record, whether its instance took
// the domain over; nothing while it has not tried yet.
func (r *Role) reportTakeOver(ctx context.Context, a *apiv1.VirtualMachineAdoption) error {
	dir, err := r.opts.Layout.VMDir(a.GetStatus().GetVmUid())
	if err != nil {
		return nil // not a uid: the controller's, and it writes uids only
	}
	rec, err := readRecord(dir)
	if err != nil || rec == nil || rec.Adoption != a.GetMetadata().GetUid() {
		return err
	}
	var phase, msg string
	switch rec.State {
	case stateTaken:
		phase, msg = apiv1.AdoptionAdopted, "the domain runs under virtplane; its disks become the VM's volumes at its first start through virtplane"
	case stateFailed:
		phase, msg = apiv1.AdoptionFailed, rec.Message
	default:
		return nil
	}
	_, err = r.work.WriteStatus(ctx, a, func(next *apiv1.VirtualMachineAdoption) {
		next.Status.Phase, next.Status.Message = phase, msg
		next.Status.VmiUid, next.Status.QemuPid = rec.VMIUID, int32(rec.QEMUPid)
	})
	return err
}

// queue asks for another look at the adoption of the VM namespace/name
// (the adoption has the VM's name).
func (r *Role) queue(namespace, name string) { r.work.Enqueue(apiv1.Ref(namespace, name)) }
