// Package restore is the node's part of restores (docs/snapshots.md,
// "Restore flow" steps 2 and 3): in Staging it copies each snapshot
// volume beside the target's volumes (<volume>.qcow2.restore-<restore
// uid>); in Committing it renames the copies over the live volumes and
// deletes the volumes the snapshot does not have. Before the swap a
// failed or deleted restore has its copies removed; the node's finalizer
// goes last.
package restore

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/grpc"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client/remotestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodework"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/storage"
)

// API is the restore service as the node uses it: it watches the
// restores of its node and writes their status.
type API interface {
	remotestore.RestoreWatcher
	UpdateStatus(ctx context.Context, in *apiv1.UpdateRestoreStatusRequest, opts ...grpc.CallOption) (*apiv1.VirtualMachineRestore, error)
}

// Copier copies a snapshot's volume (disks.QemuImg).
type Copier interface {
	Convert(ctx context.Context, src, dst string, shared bool) error
}

// Domains finds the running domain of a VM on this node: the volumes of
// a VM that runs here are never swapped.
type Domains interface {
	RunningDomain(ctx context.Context, vmUID string) (launcher.Snapshots, *apiv1.VirtualMachineInstance, error)
}

// Contents tells which namespace a snapshot content of this node is in
// (snapshot.Contents.Owner), so that a restore copies only its own
// namespace's snapshots.
type Contents interface {
	Owner(contentUID string) (namespace string, ok, synced bool)
}

// Classes is what restores need of the node's storage room: a shared
// filesystem class whose copies are restored here.
type Classes interface {
	Lookup(ctx context.Context, name string) (*storage.Class, error)
}

// VMs finds a restore's target VM (the node sees a VM's identity:
// namespace, name and uid).
type VMs interface {
	Get(ctx context.Context, in *apiv1.GetVirtualMachineRequest, opts ...grpc.CallOption) (*apiv1.VirtualMachine, error)
}

// Options configure Restores.
type Options struct {
	NodeName string
	API      API
	Layout   nodedir.Layout
	Copier   Copier
	Domains  Domains
	Contents Contents
	VMs      VMs
	// Classes are the storage classes the node uses (volumes on shared
	// filesystems); nil when the node has none.
	Classes     Classes
	CallTimeout time.Duration // bounds a status write
	Logger      *slog.Logger
}

// Restores is the node's part of restores: the informer, the queue and
// the staging under way.
type Restores struct {
	opts Options
	log  *slog.Logger
	work *nodework.Worker[*apiv1.VirtualMachineRestore]
}

// New returns the node's restore worker; Run starts it.
func New(opts Options) *Restores {
	w := &Restores{opts: opts, log: opts.Logger}
	w.work = nodework.New(nodework.Options[*apiv1.VirtualMachineRestore]{
		Name: "restore", Kind: "restore",
		Watch:    remotestore.NewRestores(opts.API),
		Selector: apiv1.LabelNodeName + "=" + opts.NodeName,
		Stops:    stops,
		UpdateStatus: func(ctx context.Context, r *apiv1.VirtualMachineRestore) (*apiv1.VirtualMachineRestore, error) {
			return opts.API.UpdateStatus(ctx, &apiv1.UpdateRestoreStatusRequest{Restore: r})
		},
		InitStatus: func(r *apiv1.VirtualMachineRestore) {
			if r.Status == nil {
				r.Status = &apiv1.VirtualMachineRestoreStatus{}
			}
		},
		CallTimeout: opts.CallTimeout, Logger: opts.Logger,
	})
	return w
}

// Cache is the informer of this node's restores.
func (w *Restores) Cache() *informer.Informer[*apiv1.VirtualMachineRestore] { return w.work.Inf }

// stops: staging must stop (the copies are dropped next).
func stops(r *apiv1.VirtualMachineRestore) bool {
	return r.GetMetadata().GetDeletionTimestamp() != nil || r.GetStatus().GetPhase() == apiv1.RestoreFailed
}

// Run runs the informer and, once it has synced, the worker in the
// background; the returned func stops them.
func (w *Restores) Run(ctx context.Context) (stop func()) {
	return w.work.Run(ctx, 1, controller.ReconcileFunc(w.Reconcile))
}

// Reconcile does the node's step of one restore of this node.
func (w *Restores) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	r, ok := w.work.Inf.GetByKey(key)
	if !ok {
		return controller.Result{}, nil
	}
	if w.work.Stale(r) {
		return controller.Result{}, nil // the watch brings the node's own write, and queues it again
	}
	st := r.GetStatus()
	deleting := r.GetMetadata().GetDeletionTimestamp() != nil
	switch {
	case st.GetPhase() == apiv1.RestoreFailed || deleting && !st.GetSwapped():
		if err := w.dropStaged(ctx, r); err != nil {
			return controller.Result{}, err
		}
		return controller.Result{}, w.release(ctx, r)
	case st.GetPhase() == apiv1.RestoreSucceeded || deleting:
		return controller.Result{}, w.release(ctx, r)
	case st.GetPhase() == apiv1.RestoreStaging && !st.GetStaged() && st.GetError() == "":
		cctx, done := w.work.Start(ctx, key)
		defer done()
		err := w.stage(cctx, r)
		if cctx.Err() != nil && ctx.Err() == nil {
			return controller.Result{}, nil // failed or deleted meanwhile: queued again
		}
		return controller.Result{}, err
	case st.GetPhase() == apiv1.RestoreCommitting && !st.GetSwapped():
		return controller.Result{}, w.swap(ctx, r)
	}
	return controller.Result{}, nil
}
