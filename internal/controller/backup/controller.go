// Package backup holds the backup controllers (docs/backups.md): the
// backup controller takes a VM's consistent point as a
// VirtualMachineSnapshot the backup owns and hands the upload to one
// node; the schedule controller makes backups on time and applies
// retention; the restore controller makes a new VM from a backup's
// manifest and hands its volumes to one node; the target controller
// probes each BackupTarget (Ready). They run in the leader, read their
// informers and reach the targets' repositories themselves (package
// backup/repo) for what needs no node: reading and deleting manifests,
// GC.
package backup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Options tune the backup controllers; zero values get the defaults.
type Options struct {
	// Clock gives the time of phases, schedules and retention (default
	// the real clock).
	Clock clock.PassiveClock
	// Cluster is the label of this cluster the manifests carry (a
	// DNS-1123 subdomain); default "virtplane".
	Cluster string
	// SourceGrace is how long a backup waits for its VM to show in the
	// cache before it fails for a missing VM (default 30 s).
	SourceGrace time.Duration
	// Repo are the options of the repositories the controllers open.
	Repo repo.Options
	// NodeGone reports whether node name is no longer registered (an
	// admin deleted it): what it held for a backup or restore went with
	// it. Nil: every node is there.
	NodeGone func(name string) bool
}

func (o *Options) complete() {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Cluster == "" {
		o.Cluster = "virtplane"
	}
	if o.SourceGrace <= 0 {
		o.SourceGrace = 30 * time.Second
	}
	if o.NodeGone == nil {
		o.NodeGone = func(string) bool { return false }
	}
	if o.Repo.Clock == nil {
		o.Repo.Clock = o.Clock
	}
}

// Targets opens the repository store a target names (target.Cache).
type Targets interface {
	Store(ctx context.Context, t *apiv1.BackupTarget) (repo.Store, error)
}

// BackupWriter writes backups (finalizers, labels, status) with
// compare-and-swap against the cached version, and deletes those
// retention drops.
type BackupWriter interface {
	Create(ctx context.Context, b *apiv1.VirtualMachineBackup) (*apiv1.VirtualMachineBackup, error)
	Update(ctx context.Context, b *apiv1.VirtualMachineBackup) (*apiv1.VirtualMachineBackup, error)
	Delete(ctx context.Context, namespace, name string, opts store.DeleteOptions) (*apiv1.VirtualMachineBackup, bool, error)
}

// SnapshotWriter makes a backup's snapshot and deletes it.
type SnapshotWriter interface {
	Create(ctx context.Context, s *apiv1.VirtualMachineSnapshot) (*apiv1.VirtualMachineSnapshot, error)
	Delete(ctx context.Context, namespace, name string, opts store.DeleteOptions) (*apiv1.VirtualMachineSnapshot, bool, error)
}

// Requeues; events usually come first.
const (
	staleRequeue = time.Second
	// retryRequeue bounds a wait on something no event announces (a
	// target that does not answer).
	retryRequeue = 10 * time.Second
	// nodeGoneRecheck is how often a deleting backup whose node still
	// holds its upload finalizer looks whether the node was deleted.
	nodeGoneRecheck = 30 * time.Second
)

// Informer indexes.
const (
	groupIndex    = "backup.group"    // "namespace/target/vm uid": a VM's backups to one target
	snapshotIndex = "backup.snapshot" // "namespace/snapshot"
)

// Condition types and reasons of backups and restores.
const (
	ConditionProgressing = "Progressing"
	reasonInProgress     = "InProgress"
	reasonSucceeded      = "Succeeded"
	reasonFailed         = "Failed"
	reasonWaiting        = "Waiting"
)

// Backups is the backup controller.
type Backups struct {
	opts      Options
	backups   *informer.Informer[*apiv1.VirtualMachineBackup]
	snaps     informer.Lister[*apiv1.VirtualMachineSnapshot]
	contents  informer.Lister[*apiv1.VirtualMachineSnapshotContent]
	vms       informer.Lister[*apiv1.VirtualMachine]
	nodes     informer.Lister[*apiv1.Node]
	targetInf informer.Lister[*apiv1.BackupTarget]
	classes   informer.Lister[*apiv1.StorageClass]
	bSt       BackupWriter
	snapSt    SnapshotWriter
	targets   Targets
	writes    *controller.WrittenVersions
	queue     controller.Queue
	log       *slog.Logger
	synced    []<-chan struct{}
}

// NewBackups registers the controller's indexes and handlers on the
// informers, which the caller runs afterwards.
func NewBackups(opts Options, bInf *informer.Informer[*apiv1.VirtualMachineBackup],
	snapInf *informer.Informer[*apiv1.VirtualMachineSnapshot], contInf *informer.Informer[*apiv1.VirtualMachineSnapshotContent],
	vmInf *informer.Informer[*apiv1.VirtualMachine], nodeInf *informer.Informer[*apiv1.Node],
	targetInf *informer.Informer[*apiv1.BackupTarget], classInf *informer.Informer[*apiv1.StorageClass],
	bSt BackupWriter, snapSt SnapshotWriter, targets Targets, log *slog.Logger) *Backups {
	opts.complete()
	if log == nil {
		log = slog.Default()
	}
	c := &Backups{
		opts: opts, backups: bInf, snaps: snapInf, contents: contInf, vms: vmInf, nodes: nodeInf, targetInf: targetInf, classes: classInf,
		bSt: bSt, snapSt: snapSt, targets: targets,
		writes: controller.NewWrittenVersions(),
		queue:  controller.NewQueue("backup"),
		log:    log.With("controller", "backup"),
		synced: []<-chan struct{}{bInf.Synced(), snapInf.Synced(), contInf.Synced(), vmInf.Synced(), nodeInf.Synced(), targetInf.Synced(), classInf.Synced()},
	}
	bInf.AddIndex(groupIndex, func(b *apiv1.VirtualMachineBackup) []string {
		if g := groupOf(b); g != "" {
			return []string{g}
		}
		return nil
	})
	bInf.AddIndex(snapshotIndex, func(b *apiv1.VirtualMachineBackup) []string {
		return []string{apiv1.Ref(b.GetMetadata().GetNamespace(), snapshotName(b))}
	})
	enqueue := func(b *apiv1.VirtualMachineBackup) { c.queue.Add(informer.Key(b)) }
	bInf.AddHandler(informer.Handler[*apiv1.VirtualMachineBackup]{
		OnAdd: enqueue,
		OnUpdate: func(old, b *apiv1.VirtualMachineBackup) {
			enqueue(b)
			if old.GetStatus().GetPhase() != b.GetStatus().GetPhase() && b.GetStatus().GetPhase() == apiv1.BackupSucceeded {
				// A newer succeeded backup: the older ones' snapshots go.
				c.requeueGroup(groupOf(b))
			}
		},
		OnDelete: func(b *apiv1.VirtualMachineBackup) {
			c.writes.Forget(informer.Key(b))
			// A deleted backup may leave an older one the newest of its
			// group: its snapshot's fate is decided again.
			c.requeueGroup(groupOf(b))
		},
	})
	bySnapshot := func(s *apiv1.VirtualMachineSnapshot) {
		for _, b := range c.backups.ByIndex(snapshotIndex, informer.Key(s)) {
			enqueue(b)
		}
	}
	snapInf.AddHandler(informer.Handler[*apiv1.VirtualMachineSnapshot]{
		OnAdd:    bySnapshot,
		OnUpdate: func(_, s *apiv1.VirtualMachineSnapshot) { bySnapshot(s) },
		OnDelete: bySnapshot,
	})
	// A VM deleted has no next backup: the snapshot kept for it goes.
	vmInf.AddHandler(informer.Handler[*apiv1.VirtualMachine]{OnDelete: func(vm *apiv1.VirtualMachine) {
		for _, b := range c.backups.List() {
			if b.GetMetadata().GetLabels()[apiv1.LabelBackupVMUID] == vm.GetMetadata().GetUid() {
				enqueue(b)
			}
		}
	}})
	// A node deleted for good releases what it held.
	nodeInf.AddHandler(informer.Handler[*apiv1.Node]{OnDelete: func(n *apiv1.Node) {
		for _, b := range c.backups.List() {
			if b.GetStatus().GetNodeName() == n.GetMetadata().GetName() {
				enqueue(b)
			}
		}
	}})
	return c
}

// Run processes backups with workers goroutines until ctx ends.
func (c *Backups) Run(ctx context.Context, workers int) {
	if !controller.WaitForSynced(ctx, c.queue, c.synced...) {
		return
	}
	controller.Run(ctx, "backup", c.queue, workers, c, c.log)
}

func (c *Backups) requeueGroup(g string) {
	if g == "" {
		return
	}
	for _, b := range c.backups.ByIndex(groupIndex, g) {
		c.queue.Add(informer.Key(b))
	}
}

// groupOf is the key of b's group: the backups of one VM (by uid) to one
// target, among which the newest succeeded one is the next one's base.
// "" until the controller has labelled it with its VM.
func groupOf(b *apiv1.VirtualMachineBackup) string {
	uid := b.GetMetadata().GetLabels()[apiv1.LabelBackupVMUID]
	if uid == "" {
		return ""
	}
	return b.GetMetadata().GetNamespace() + "/" + b.GetSpec().GetTarget() + "/" + uid
}

// snapshotName is the snapshot backup b takes.
func snapshotName(b *apiv1.VirtualMachineBackup) string {
	if n := b.GetStatus().GetSnapshotName(); n != "" {
		return n
	}
	return apiv1.BackupSnapshotName(b.GetMetadata().GetUid())
}

func backupStatus(b *apiv1.VirtualMachineBackup) *apiv1.VirtualMachineBackupStatus {
	if b.Status == nil {
		b.Status = &apiv1.VirtualMachineBackupStatus{}
	}
	return b.Status
}

// write stores next with compare-and-swap on the cached version it was
// cloned from. A conflict is returned: the cache is behind, and the
// newer version's event requeues the key.
func (c *Backups) write(ctx context.Context, key string, next *apiv1.VirtualMachineBackup) error {
	out, err := c.bSt.Update(ctx, next)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("writing backup %s: %w", key, err)
	}
	if out.GetMetadata().GetDeletionTimestamp() == nil || len(out.GetMetadata().GetFinalizers()) > 0 {
		c.writes.Wrote(key, out.GetMetadata().GetResourceVersion())
	}
	return nil
}

func (c *Backups) writeIfChanged(ctx context.Context, key string, old, next *apiv1.VirtualMachineBackup) error {
	if proto.Equal(old, next) {
		return nil
	}
	return c.write(ctx, key, next)
}

// setConditions sets Progressing and Ready.
func setConditions(conds []*apiv1.Condition, now time.Time, progressing, reason, msg string, ready bool) []*apiv1.Condition {
	conds = apiv1.SetCondition(conds, &apiv1.Condition{Type: ConditionProgressing, Status: progressing, Reason: reason, Message: msg}, now)
	rs, rr := apiv1.ConditionFalse, reasonInProgress
	switch {
	case ready:
		rs, rr = apiv1.ConditionTrue, reasonSucceeded
	case reason == reasonFailed:
		rr = reasonFailed
	}
	return apiv1.SetCondition(conds, &apiv1.Condition{Type: apiv1.ConditionReady, Status: rs, Reason: rr}, now)
}

func removeString(list []string, s string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(v string) bool { return v == s })
}

// nodeReady says whether n is Ready and schedulable: a node that can take
// work now.
func nodeReady(n *apiv1.Node) bool {
	return apiv1.IsConditionTrue(n.GetStatus().GetConditions(), apiv1.ConditionReady) && n.GetStatus().GetSchedulable()
}

// reachesClass says whether node n reaches class name: the class selects
// it and the node reports it ready.
func reachesClass(n *apiv1.Node, sc *apiv1.StorageClass) bool {
	if !sc.SelectsNode(n.GetMetadata().GetLabels()) || sc.FenceOf(n.GetMetadata().GetName()) != nil {
		return false
	}
	for _, s := range n.GetStatus().GetStorage() {
		if s.GetClass() == sc.GetMetadata().GetName() {
			return s.GetReady()
		}
	}
	return false
}

// pickNode is the first Ready node (by name) that target t selects and
// that reaches every class in classes, or "".
func pickNode(nodes []*apiv1.Node, t *apiv1.BackupTarget, classes []*apiv1.StorageClass) string {
	names := make([]string, 0, len(nodes))
	byName := map[string]*apiv1.Node{}
	for _, n := range nodes {
		names = append(names, n.GetMetadata().GetName())
		byName[n.GetMetadata().GetName()] = n
	}
	slices.Sort(names)
next:
	for _, name := range names {
		n := byName[name]
		if !nodeReady(n) || !t.SelectsNode(n.GetMetadata().GetLabels()) {
			continue
		}
		for _, sc := range classes {
			if !reachesClass(n, sc) {
				continue next
			}
		}
		return name
	}
	return ""
}
