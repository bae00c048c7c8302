package backup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// The life of a backup restore (docs/backups.md, "Restore"):
//
//	""         → Pending      finalizer, started
//	Pending    → InProgress   manifest read and checked, the new VM made
//	                          (halted, locked), node chosen: one write
//	InProgress → Succeeded    the node wrote every volume; the VM unlocked
//	*          → Failed       the VM it made deleted (its volumes with it)
//
// A new VM only: no lock of an existing VM, no swap, nothing to undo
// but the VM it made.

// RestoreWriter writes backup restores with compare-and-swap.
type RestoreWriter interface {
	Update(ctx context.Context, r *apiv1.VirtualMachineBackupRestore) (*apiv1.VirtualMachineBackupRestore, error)
}

// VMStore makes the restored VM, unlocks it, and deletes it when the
// restore fails.
type VMStore interface {
	Create(ctx context.Context, vm *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error)
	GuaranteedUpdate(ctx context.Context, namespace, name string,
		fn func(*apiv1.VirtualMachine) (*apiv1.VirtualMachine, error)) (*apiv1.VirtualMachine, error)
	Delete(ctx context.Context, namespace, name string, opts store.DeleteOptions) (*apiv1.VirtualMachine, bool, error)
}

// Restores is the backup restore controller.
type Restores struct {
	opts      Options
	validate  validation.Options
	restores  *informer.Informer[*apiv1.VirtualMachineBackupRestore]
	vms       informer.Lister[*apiv1.VirtualMachine]
	nodes     informer.Lister[*apiv1.Node]
	targetInf informer.Lister[*apiv1.BackupTarget]
	classes   informer.Lister[*apiv1.StorageClass]
	rSt       RestoreWriter
	vmSt      VMStore
	targets   Targets
	writes    *controller.WrittenVersions
	queue     controller.Queue
	log       *slog.Logger
	synced    []<-chan struct{}
}

// vmIndex indexes restores by the VM they make.
const vmIndex = "backuprestore.vm" // "namespace/vm"

// NewRestores registers the controller's handlers. vopts are the API's
// validation options: the VM a manifest describes is checked as the API
// checks a VM it is sent.
func NewRestores(opts Options, vopts validation.Options, rInf *informer.Informer[*apiv1.VirtualMachineBackupRestore],
	vmInf *informer.Informer[*apiv1.VirtualMachine], nodeInf *informer.Informer[*apiv1.Node],
	targetInf *informer.Informer[*apiv1.BackupTarget], classInf *informer.Informer[*apiv1.StorageClass],
	rSt RestoreWriter, vmSt VMStore, targets Targets, log *slog.Logger) *Restores {
	opts.complete()
	if log == nil {
		log = slog.Default()
	}
	c := &Restores{
		opts: opts, validate: vopts, restores: rInf, vms: vmInf, nodes: nodeInf, targetInf: targetInf, classes: classInf,
		rSt: rSt, vmSt: vmSt, targets: targets,
		writes: controller.NewWrittenVersions(),
		queue:  controller.NewQueue("backup-restore"),
		log:    log.With("controller", "backup-restore"),
		synced: []<-chan struct{}{rInf.Synced(), vmInf.Synced(), nodeInf.Synced(), targetInf.Synced(), classInf.Synced()},
	}
	rInf.AddIndex(vmIndex, func(r *apiv1.VirtualMachineBackupRestore) []string {
		return []string{apiv1.Ref(r.GetMetadata().GetNamespace(), r.GetSpec().GetVmName())}
	})
	enqueue := func(r *apiv1.VirtualMachineBackupRestore) { c.queue.Add(informer.Key(r)) }
	rInf.AddHandler(informer.Handler[*apiv1.VirtualMachineBackupRestore]{
		OnAdd:    enqueue,
		OnUpdate: func(_, r *apiv1.VirtualMachineBackupRestore) { enqueue(r) },
		OnDelete: func(r *apiv1.VirtualMachineBackupRestore) { c.writes.Forget(informer.Key(r)) },
	})
	byVM := func(vm *apiv1.VirtualMachine) {
		for _, r := range c.restores.ByIndex(vmIndex, informer.Key(vm)) {
			enqueue(r)
		}
	}
	vmInf.AddHandler(informer.Handler[*apiv1.VirtualMachine]{OnAdd: byVM, OnDelete: byVM})
	nodeInf.AddHandler(informer.Handler[*apiv1.Node]{OnDelete: func(n *apiv1.Node) {
		for _, r := range c.restores.List() {
			if r.GetStatus().GetNodeName() == n.GetMetadata().GetName() {
				enqueue(r)
			}
		}
	}})
	return c
}

// Run processes restores with workers goroutines until ctx ends.
func (c *Restores) Run(ctx context.Context, workers int) {
	if !controller.WaitForSynced(ctx, c.queue, c.synced...) {
		return
	}
	controller.Run(ctx, "backup-restore", c.queue, workers, c, c.log)
}

// RestoreLock is what a backup restore writes into its VM's
// status.restore_in_progress: the VM starts no instance until it is
// cleared. Apart from the VirtualMachineRestores' names.
func RestoreLock(name string) string { return "backup-restore/" + name }

func restoreStatus(r *apiv1.VirtualMachineBackupRestore) *apiv1.VirtualMachineBackupRestoreStatus {
	if r.Status == nil {
		r.Status = &apiv1.VirtualMachineBackupRestoreStatus{}
	}
	return r.Status
}

// Reconcile implements controller.Reconciler.
func (c *Restores) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	r, ok := c.restores.GetByKey(key)
	if !ok {
		c.writes.Forget(key)
		return controller.Result{}, nil
	}
	if c.writes.Stale(key, r.GetMetadata().GetResourceVersion()) {
		return controller.Result{RequeueAfter: staleRequeue}, nil
	}
	if r.GetMetadata().GetDeletionTimestamp() != nil {
		return c.finalize(ctx, key, r)
	}
	if !slices.Contains(r.GetMetadata().GetFinalizers(), apiv1.FinalizerBackupRestore) || r.GetStatus().GetPhase() == "" {
		next := proto.Clone(r).(*apiv1.VirtualMachineBackupRestore)
		if !slices.Contains(next.Metadata.Finalizers, apiv1.FinalizerBackupRestore) {
			next.Metadata.Finalizers = append(next.Metadata.Finalizers, apiv1.FinalizerBackupRestore)
		}
		st := restoreStatus(next)
		if st.Phase == "" {
			now := c.opts.Clock.Now()
			st.Phase, st.Started = apiv1.BackupPending, timestamppb.New(now)
			st.Conditions = setConditions(st.Conditions, now, apiv1.ConditionTrue, reasonInProgress, "reading the backup's manifest", false)
		}
		return controller.Result{}, c.write(ctx, key, next)
	}
	switch r.GetStatus().GetPhase() {
	case apiv1.BackupPending:
		return c.pending(ctx, key, r)
	case apiv1.BackupInProgress:
		return controller.Result{}, c.inProgress(ctx, key, r)
	}
	return controller.Result{}, nil
}

// pending reads the manifest, makes the VM and hands the volumes to a
// node, in that order: a crash after the VM was made finds it again by
// its annotation.
func (c *Restores) pending(ctx context.Context, key string, r *apiv1.VirtualMachineBackupRestore) (controller.Result, error) {
	sp := r.GetSpec()
	t, ok := c.targetInf.Get("", sp.GetTarget())
	if !ok {
		return controller.Result{}, c.fail(ctx, key, r, fmt.Sprintf("backup target %q does not exist", sp.GetTarget()))
	}
	st, err := c.targets.Store(ctx, t)
	if err != nil {
		return controller.Result{RequeueAfter: retryRequeue}, c.waiting(ctx, key, r, "opening the backup target: "+err.Error())
	}
	m, err := repo.New(st, c.opts.Repo).GetManifest(ctx, sp.GetBackupId())
	switch {
	case errors.Is(err, repo.ErrCorrupt):
		return controller.Result{}, c.fail(ctx, key, r, fmt.Sprintf("backup %s in target %q: %v", sp.GetBackupId(), sp.GetTarget(), err))
	case errors.Is(err, repo.ErrNotFound):
		return controller.Result{}, c.fail(ctx, key, r, fmt.Sprintf("backup %s is not in target %q", sp.GetBackupId(), sp.GetTarget()))
	case err != nil:
		return controller.Result{RequeueAfter: retryRequeue}, c.waiting(ctx, key, r, "reading the backup's manifest: "+err.Error())
	}
	if ns := r.GetMetadata().GetNamespace(); m.VMNamespace != ns && r.GetMetadata().GetAnnotations()[apiv1.AnnotationAnyNamespaceRestore] != "true" {
		return controller.Result{}, c.fail(ctx, key, r, fmt.Sprintf(
			"backup %s is of a VM of namespace %q: restoring it into namespace %q needs a restore made by a cluster-admin", sp.GetBackupId(), m.VMNamespace, ns))
	}
	plan, err := planRestore(r, m, c.validate, c.classes)
	if err != nil {
		return controller.Result{}, c.fail(ctx, key, r, err.Error())
	}
	node, why := c.restoreNode(r, t, plan.classes)
	if why != "" {
		return controller.Result{}, c.fail(ctx, key, r, why)
	}
	if node == "" {
		return controller.Result{RequeueAfter: retryRequeue}, c.waiting(ctx, key, r, "no Ready node reaches the target and the volumes' storage classes")
	}
	vm := plan.vm
	if plan.pinned {
		vm.Status.NodeName = node
	}
	ns := r.GetMetadata().GetNamespace()
	made, ok := c.vms.Get(ns, sp.GetVmName())
	switch {
	case ok && !c.madeByUs(r, made):
		return controller.Result{}, c.fail(ctx, key, r, fmt.Sprintf("VM %q exists: a backup is restored into a new VM", sp.GetVmName()))
	case !ok:
		made, err = c.vmSt.Create(ctx, vm)
		if errors.Is(err, store.ErrAlreadyExists) {
			return controller.Result{RequeueAfter: staleRequeue}, nil // the VM's event tells whose it is
		}
		if err != nil {
			return controller.Result{}, fmt.Errorf("creating VM %s for backup restore %s: %w", apiv1.Ref(ns, sp.GetVmName()), key, err)
		}
		c.log.Info("backup restore made its VM", "restore", key, "vm", sp.GetVmName(), "uid", made.GetMetadata().GetUid(), "node", node)
	}
	next := proto.Clone(r).(*apiv1.VirtualMachineBackupRestore)
	if next.Metadata.Labels == nil {
		next.Metadata.Labels = map[string]string{}
	}
	next.Metadata.Labels[apiv1.LabelNodeName] = node
	if !slices.Contains(next.Metadata.Finalizers, apiv1.FinalizerBackupRestoreData) {
		next.Metadata.Finalizers = append(next.Metadata.Finalizers, apiv1.FinalizerBackupRestoreData)
	}
	rs := restoreStatus(next)
	rs.Phase, rs.NodeName, rs.VmUid = apiv1.BackupInProgress, node, made.GetMetadata().GetUid()
	rs.SourceVm = apiv1.Ref(m.VMNamespace, m.VMName)
	rs.Conditions = setConditions(rs.Conditions, c.opts.Clock.Now(), apiv1.ConditionTrue, reasonInProgress, "node "+node+" writes the volumes", false)
	return controller.Result{}, c.write(ctx, key, next)
}

// madeByUs says whether vm is the one restore r made.
func (c *Restores) madeByUs(r *apiv1.VirtualMachineBackupRestore, vm *apiv1.VirtualMachine) bool {
	if uid := r.GetStatus().GetVmUid(); uid != "" {
		return vm.GetMetadata().GetUid() == uid
	}
	return vm.GetMetadata().GetAnnotations()[apiv1.AnnotationLastRestore] == apiv1.LastRestoreValue(r.GetMetadata().GetName(), r.GetMetadata().GetUid())
}

// restoreNode is the node that writes the volumes: the one the spec names
// (checked), else the first Ready one the target and the classes select.
func (c *Restores) restoreNode(r *apiv1.VirtualMachineBackupRestore, t *apiv1.BackupTarget, classes []*apiv1.StorageClass) (node, why string) {
	n := r.GetSpec().GetNodeName()
	if n == "" {
		return pickNode(c.nodes.List(), t, classes), ""
	}
	nd, ok := c.nodes.Get("", n)
	switch {
	case !ok:
		return "", fmt.Sprintf("spec.node_name: node %s does not exist", n)
	case !t.SelectsNode(nd.GetMetadata().GetLabels()):
		return "", fmt.Sprintf("spec.node_name: backup target %q does not select node %s (its spec.node_selector)", t.GetMetadata().GetName(), n)
	}
	for _, sc := range classes {
		if !reachesClass(nd, sc) {
			return "", fmt.Sprintf("spec.node_name: node %s does not reach storage class %q", n, sc.GetMetadata().GetName())
		}
	}
	if !nodeReady(nd) {
		return "", "" // wait for it
	}
	return n, ""
}

// inProgress follows the node's writes.
func (c *Restores) inProgress(ctx context.Context, key string, r *apiv1.VirtualMachineBackupRestore) error {
	st := r.GetStatus()
	vm, ok := c.vms.Get(r.GetMetadata().GetNamespace(), r.GetSpec().GetVmName())
	switch {
	case st.GetWritePhase() == apiv1.BackupFailed:
		return c.fail(ctx, key, r, "writing the volumes failed: "+st.GetWriteError())
	case !ok || vm.GetMetadata().GetUid() != st.GetVmUid():
		return c.fail(ctx, key, r, fmt.Sprintf("VM %q was deleted during the restore", r.GetSpec().GetVmName()))
	case c.opts.NodeGone(st.GetNodeName()):
		return c.fail(ctx, key, r, fmt.Sprintf("node %s, which wrote the volumes, was deleted", st.GetNodeName()))
	case st.GetWritePhase() != apiv1.BackupSucceeded:
		msg := "node " + st.GetNodeName() + " writes the volumes"
		if m := st.GetMessage(); m != "" {
			msg += ": " + m
		}
		next := proto.Clone(r).(*apiv1.VirtualMachineBackupRestore)
		ns := restoreStatus(next)
		ns.Conditions = setConditions(ns.Conditions, c.opts.Clock.Now(), apiv1.ConditionTrue, reasonInProgress, msg, false)
		if proto.Equal(r, next) {
			return nil
		}
		return c.write(ctx, key, next)
	}
	if err := c.unlock(ctx, r); err != nil {
		return err
	}
	next := proto.Clone(r).(*apiv1.VirtualMachineBackupRestore)
	ns := restoreStatus(next)
	now := c.opts.Clock.Now()
	ns.Phase, ns.Completed, ns.Error = apiv1.BackupSucceeded, timestamppb.New(now), ""
	ns.Conditions = setConditions(ns.Conditions, now, apiv1.ConditionFalse, reasonSucceeded, "Operation complete", true)
	if err := c.write(ctx, key, next); err != nil {
		return err
	}
	c.log.Info("backup restore succeeded", "restore", key, "vm", r.GetSpec().GetVmName(), "node", st.GetNodeName())
	return nil
}

// unlock clears the VM's lock if this restore holds it.
func (c *Restores) unlock(ctx context.Context, r *apiv1.VirtualMachineBackupRestore) error {
	ns, name := r.GetMetadata().GetNamespace(), r.GetSpec().GetVmName()
	lock := RestoreLock(r.GetMetadata().GetName())
	_, err := c.vmSt.GuaranteedUpdate(ctx, ns, name, func(cur *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		if cur.GetStatus().GetRestoreInProgress() == lock {
			cur.Status.RestoreInProgress = ""
		}
		return cur, nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("unlocking VM %s: %w", apiv1.Ref(ns, name), err)
	}
	return nil
}

// waiting records what a pending restore waits for.
func (c *Restores) waiting(ctx context.Context, key string, r *apiv1.VirtualMachineBackupRestore, msg string) error {
	next := proto.Clone(r).(*apiv1.VirtualMachineBackupRestore)
	st := restoreStatus(next)
	st.Conditions = setConditions(st.Conditions, c.opts.Clock.Now(), apiv1.ConditionFalse, reasonWaiting, msg, false)
	if proto.Equal(r, next) {
		return nil
	}
	return c.write(ctx, key, next)
}

// fail ends the restore: the VM it made is deleted (the node drops
// what it staged, and the VM's volumes go with the VM).
func (c *Restores) fail(ctx context.Context, key string, r *apiv1.VirtualMachineBackupRestore, msg string) error {
	if err := c.deleteVM(ctx, r); err != nil {
		return err
	}
	next := proto.Clone(r).(*apiv1.VirtualMachineBackupRestore)
	st := restoreStatus(next)
	now := c.opts.Clock.Now()
	st.Phase, st.Error, st.Completed = apiv1.BackupFailed, msg, timestamppb.New(now)
	st.Conditions = setConditions(st.Conditions, now, apiv1.ConditionFalse, reasonFailed, msg, false)
	if err := c.write(ctx, key, next); err != nil {
		return err
	}
	c.log.Info("backup restore failed", "restore", key, "error", msg)
	return nil
}

func (c *Restores) deleteVM(ctx context.Context, r *apiv1.VirtualMachineBackupRestore) error {
	ns, name := r.GetMetadata().GetNamespace(), r.GetSpec().GetVmName()
	vm, ok := c.vms.Get(ns, name)
	if !ok || !c.madeByUs(r, vm) || vm.GetMetadata().GetDeletionTimestamp() != nil {
		return nil
	}
	_, _, err := c.vmSt.Delete(ctx, ns, name, store.DeleteOptions{UID: vm.GetMetadata().GetUid()})
	if err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("deleting VM %s made by the failed restore: %w", apiv1.Ref(ns, name), err)
	}
	c.log.Info("deleted the VM the failed backup restore made", "vm", apiv1.Ref(ns, name))
	return nil
}

// finalize is a deleted restore's clean-up: once its node stopped (its
// finalizer gone, or the node deleted), a restore that did not succeed
// deletes its VM.
func (c *Restores) finalize(ctx context.Context, key string, r *apiv1.VirtualMachineBackupRestore) (controller.Result, error) {
	md := r.GetMetadata()
	if !slices.Contains(md.GetFinalizers(), apiv1.FinalizerBackupRestore) {
		return controller.Result{}, nil
	}
	if slices.Contains(md.GetFinalizers(), apiv1.FinalizerBackupRestoreData) {
		if !c.opts.NodeGone(r.GetStatus().GetNodeName()) {
			return controller.Result{RequeueAfter: nodeGoneRecheck}, nil
		}
		next := proto.Clone(r).(*apiv1.VirtualMachineBackupRestore)
		next.Metadata.Finalizers = removeString(next.Metadata.Finalizers, apiv1.FinalizerBackupRestoreData)
		return controller.Result{}, c.write(ctx, key, next)
	}
	if r.GetStatus().GetPhase() != apiv1.BackupSucceeded {
		if err := c.deleteVM(ctx, r); err != nil {
			return controller.Result{}, err
		}
	}
	next := proto.Clone(r).(*apiv1.VirtualMachineBackupRestore)
	next.Metadata.Finalizers = removeString(next.Metadata.Finalizers, apiv1.FinalizerBackupRestore)
	return controller.Result{}, c.write(ctx, key, next)
}

func (c *Restores) write(ctx context.Context, key string, next *apiv1.VirtualMachineBackupRestore) error {
	out, err := c.rSt.Update(ctx, next)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return fmt.Errorf("writing backup restore %s: %w", key, err)
	}
	if out.GetMetadata().GetDeletionTimestamp() == nil || len(out.GetMetadata().GetFinalizers()) > 0 {
		c.writes.Wrote(key, out.GetMetadata().GetResourceVersion())
	}
	return nil
}
