// Package migration is the node's part of live migration (KubeVirt's
// virt-handler migration-source.go and migration-target.go). The
// controller hands a migration over in the instance's migration_state;
// each node sees its part there:
//
//   - the Target (migration_state.target_node, an instance it sees
//     through the migration-target label) prepares blank disks, has a
//     launcher define the receiving domain, publishes that it is ready
//     and the domain's XML, and renews the receiving domain while the
//     migration runs; if the migration fails it removes all of it;
//   - the Source (the node the instance runs on) checks the destination
//     the controller wrote (package migrationdest) and starts libvirt's
//     job to it through its launcher once the target is ready, reports progress,
//     aborts on request, and records the end; on success it hands the
//     instance to the target in the same write (node_name), then removes
//     its stopped domain, launcher and files, the volumes included (they
//     were copied to the target).
//
// Both survive an agent restart: the launchers keep running, the state
// record says what this node was doing, and the launcher reports the
// job's outcome from libvirt. Everything else about an instance is the
// node's handler's, which the roles hand back to through Handler.
package migration

import (
	"context"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/launchers"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/vmistatus"
)

// Records is the node's state database as the roles use it.
type Records interface {
	// Record returns the state record of key, or nil.
	Record(key string) (*state.VMI, error)
	// NewRecord is the state record of an instance this node takes.
	NewRecord(vmi *apiv1.VirtualMachineInstance) (*state.VMI, error)
	PutVMI(rec *state.VMI) error
}

// Launchers are the node's launcher connections.
type Launchers interface {
	Ensure(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI) (*launchers.Conn, error)
	Persist(rec *state.VMI, c *launchers.Conn) error
}

// Handler is the node's handler, which the roles hand back to.
type Handler interface {
	// Admissible reports whether the node may act on vmi at all.
	Admissible(vmi *apiv1.VirtualMachineInstance) bool
	// Unreachable handles a launcher that cannot be reached or started:
	// the instance keeps its phase for the launcher grace, then fails.
	Unreachable(ctx context.Context, key string, vmi *apiv1.VirtualMachineInstance, c *launchers.Conn, cause error) (controller.Result, error)
	// RemoveLocal removes the record's domain (which must not run),
	// launcher and files, reporting nothing on the instance.
	RemoveLocal(ctx context.Context, rec *state.VMI) (controller.Result, error)
}

// Images pulls the Images an instance needs (imagepull.Controller).
type Images interface {
	PullFor(ctx context.Context, vmi *apiv1.VirtualMachineInstance) error
}

// Disks prepares the files of an incoming instance: blank volumes to
// copy into, a cloud-init seed, overlays over its images (package disks).
type Disks interface {
	PrepareIncoming(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI) (*launcherpb.SyncOptions, error)
}

// Targets are the instances migrating to this node, which are not this
// node's yet (the migration-target label's informer).
type Targets interface {
	GetByKey(key string) (*apiv1.VirtualMachineInstance, bool)
}

// Options configure the roles.
type Options struct {
	NodeName string
	// Address is where this node receives migrations (the agent's
	// MigrationOptions, registered with the node); without one it takes
	// none.
	Address string
	// KVM reports whether guests here use KVM (known once the agent runs).
	KVM func() bool
	// Poll is how often a running migration is looked at;
	// IncomingLease how long a receiving domain outlives its agent's
	// last renewal; CallTimeout bounds launcher calls.
	Poll, IncomingLease, CallTimeout time.Duration

	Records   Records
	Launchers Launchers
	Handler   Handler
	// Images may be nil: no Images are pulled.
	Images  Images
	Disks   Disks
	Status  *vmistatus.Writer
	Targets Targets
	Layout  nodedir.Layout
	Logger  *slog.Logger
}

// Roles are the source and the target; Pass decides which acts.
type Roles struct {
	opts   Options
	log    *slog.Logger
	source source
	target target
}

// New returns the roles.
func New(opts Options) *Roles {
	r := &Roles{opts: opts, log: opts.Logger}
	r.source = source{r}
	r.target = target{r}
	return r
}

// Pass handles the key when a migration decides what this node does with
// it; handled is false when the handler should run, with vmi as the
// instance it should see (a migrated instance this node sees only through
// the target label until the controller relabels it). own is the
// instance as the node's informer has it, nil when it has none or the
// handler does not admit it.
func (r *Roles) Pass(ctx context.Context, key string, own *apiv1.VirtualMachineInstance) (res controller.Result, vmi *apiv1.VirtualMachineInstance, handled bool, err error) {
	self := r.opts.NodeName
	target, _ := r.opts.Targets.GetByKey(key)
	if target != nil && !r.opts.Handler.Admissible(target) {
		target = nil
	}
	if own != nil {
		st := own.GetStatus().GetMigrationState()
		switch node := own.GetStatus().GetNodeName(); {
		case node == self && apiv1.MigrationInFlight(own) && st.GetSourceNode() == self && sourceActs(st):
			res, err = r.source.migrate(ctx, own)
			return res, own, true, err
		case node != "" && node != self:
			// Handed to another node by a migration (the label follows
			// later): this node's copy goes, and nothing is reported.
			res, err = r.source.migratedAway(ctx, key, own)
			return res, own, true, err
		}
		return res, own, false, nil
	}
	if target == nil {
		return res, nil, false, nil
	}
	st := target.GetStatus().GetMigrationState()
	switch {
	case target.GetStatus().GetNodeName() == self:
		// Ours now; the node label follows.
		return res, target, false, nil
	case st.GetTargetNode() != self:
		return res, nil, false, nil
	case !st.GetCompleted():
		res, err = r.target.receive(ctx, target)
		return res, target, true, err
	case st.GetFailed():
		res, err = r.target.failed(ctx, key, target)
		return res, target, true, err
	}
	// Completed: the source is handing the instance over.
	return controller.Result{RequeueAfter: r.opts.Poll}, target, true, nil
}

// putRecord saves next as key's record and makes rec it.
func (r *Roles) putRecord(rec, next *state.VMI) error {
	if err := r.opts.Records.PutVMI(next); err != nil {
		return err
	}
	*rec = *next
	return nil
}

// forTarget is the instance as the target's launcher builds it: placed
// here (the domain's metadata names this node), with the source domain's
// UUID.
func (r *Roles) forTarget(v *apiv1.VirtualMachineInstance) *apiv1.VirtualMachineInstance {
	out := proto.Clone(v).(*apiv1.VirtualMachineInstance)
	out.Status.NodeName = r.opts.NodeName
	return out
}
