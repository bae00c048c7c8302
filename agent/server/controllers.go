package server

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/apiserver"
	adoptionctl "github.com/virtplane/terraform-provider-virtplane/internal/controller/adoption"
	clonectl "github.com/virtplane/terraform-provider-virtplane/internal/controller/clone"
	evacctl "github.com/virtplane/terraform-provider-virtplane/internal/controller/evacuation"
	exportctl "github.com/virtplane/terraform-provider-virtplane/internal/controller/export"
	migctl "github.com/virtplane/terraform-provider-virtplane/internal/controller/migration"
	nodectl "github.com/virtplane/terraform-provider-virtplane/internal/controller/node"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/nsusage"
	poolctl "github.com/virtplane/terraform-provider-virtplane/internal/controller/pool"
	rsctl "github.com/virtplane/terraform-provider-virtplane/internal/controller/replicaset"
	restorectl "github.com/virtplane/terraform-provider-virtplane/internal/controller/restore"
	snapctl "github.com/virtplane/terraform-provider-virtplane/internal/controller/snapshot"
	storagectl "github.com/virtplane/terraform-provider-virtplane/internal/controller/storage"
	vmctl "github.com/virtplane/terraform-provider-virtplane/internal/controller/vm"
	vmictl "github.com/virtplane/terraform-provider-virtplane/internal/controller/vmi"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// ControllerOptions tune the controllers the leader runs.
type ControllerOptions struct {
	VMWorkers, VMIWorkers, NodeWorkers int
	// MemoryOverhead is reserved per VM beyond guest memory at placement.
	MemoryOverhead     resource.Quantity
	CPUAllocationRatio int64
	// FenceMargin is added to the node lease before a RestartElsewhere
	// VM's instance on a silent node is failed (docs/failover.md).
	FenceMargin time.Duration
	// Migration is the cluster's migration configuration
	// (docs/migration.md); MigrationWorkers defaults to 3.
	Migration        migctl.Options
	MigrationWorkers int
	// DefaultEvictionStrategy applies to instances that set none
	// (--default-eviction-strategy); the API's Evict uses it too.
	DefaultEvictionStrategy string
	// ClusterName labels the backups this cluster writes (--cluster-name).
	ClusterName string
}

// runControllers builds informers and controllers for one leadership term
// and runs them until ctx ends. Queues and caches are not reused across
// terms: a new leader starts from a fresh listing.
func runControllers(ctx context.Context, deps Deps, o Options) {
	co := o.ControllerOptions
	log := deps.Logger
	st := deps.Stores
	vmInf := informer.New(st.VMs, store.ListOptions{}, log.With("informer", "vm"))
	vmiInf := informer.New(st.VMIs, store.ListOptions{}, log.With("informer", "vmi"))
	nodeInf := informer.New(st.Nodes, store.ListOptions{}, log.With("informer", "node"))
	imageInf := informer.New(st.Images, store.ListOptions{}, log.With("informer", "image"))
	classInf := informer.New(st.StorageClasses, store.ListOptions{}, log.With("informer", "storageclass"))
	migInf := informer.New(st.Migrations, store.ListOptions{}, log.With("informer", "migration"))
	rsInf := informer.New(st.ReplicaSets, store.ListOptions{}, log.With("informer", "replicaset"))
	poolInf := informer.New(st.Pools, store.ListOptions{}, log.With("informer", "pool"))
	snapInf := informer.New(st.Snapshots, store.ListOptions{}, log.With("informer", "snapshot"))
	contentInf := informer.New(st.SnapshotContents, store.ListOptions{}, log.With("informer", "snapshotcontent"))
	restoreInf := informer.New(st.Restores, store.ListOptions{}, log.With("informer", "restore"))
	cloneInf := informer.New(st.Clones, store.ListOptions{}, log.With("informer", "clone"))
	exportInf := informer.New(st.Exports, store.ListOptions{}, log.With("informer", "export"))
	adoptionInf := informer.New(st.Adoptions, store.ListOptions{}, log.With("informer", "adoption"))
	nsInf := informer.New(st.Namespaces, store.ListOptions{}, log.With("informer", "namespace"))

	// Controllers register handlers and indexes before the informers run.
	vmc := vmctl.New(vmctl.Options{}, vmInf, vmiInf, st.VMs, st.VMIs, log)
	vmic := vmictl.New(vmictl.Options{MemoryOverhead: co.MemoryOverhead, CPUAllocationRatio: co.CPUAllocationRatio, Images: imageInf,
		HostPolicy: o.HostPolicy, StorageClasses: classInf, Namespaces: nsInf},
		vmiInf, nodeInf, st.VMIs, log)
	imageInf.AddHandler(informer.Handler[*apiv1.Image]{OnAdd: func(*apiv1.Image) { vmic.ImagesChanged() }})
	classInf.AddHandler(informer.Handler[*apiv1.StorageClass]{
		OnAdd:    func(*apiv1.StorageClass) { vmic.ImagesChanged() },
		OnUpdate: func(_, _ *apiv1.StorageClass) { vmic.ImagesChanged() },
	})
	// A namespace's allowed host resources widened: an instance waiting
	// for them may fit now. (Usage moves with every VM written and
	// places nothing, so only a spec change, its generation, counts.)
	nsInf.AddHandler(informer.Handler[*apiv1.Namespace]{
		OnUpdate: func(old, cur *apiv1.Namespace) {
			if old.GetMetadata().GetGeneration() != cur.GetMetadata().GetGeneration() {
				vmic.ImagesChanged()
			}
		},
	})
	migOpts := co.Migration
	migOpts.LockedBy = func(ns, name string) string {
		vm, ok := vmInf.Get(ns, name)
		if !ok {
			return ""
		}
		return apiv1.LockedBy(vm)
	}
	mc := migctl.New(migOpts, migInf, vmiInf, nodeInf, vmic, st.Migrations, st.VMIs, log)
	ec := evacctl.New(evacctl.Options{DefaultEvictionStrategy: co.DefaultEvictionStrategy},
		nodeInf, vmiInf, migInf, st.Nodes, st.VMIs, st.Migrations, log)
	// The server's copies of the classes' keys live in its data dir, root's
	// alone (the CLIs read them from there).
	stc := storagectl.New(storagectl.Options{Dir: filepath.Join(o.DataDir, "storage")}, classInf, nodeInf, st.StorageClasses, log)
	nc := nodectl.New(nodectl.Options{Lease: o.NodeLease, FenceMargin: co.FenceMargin, Fencer: stc},
		nodeInf, vmiInf, vmInf, st.Nodes, st.VMIs, log)
	rsc := rsctl.New(rsctl.Options{}, rsInf, vmiInf, st.ReplicaSets, st.VMIs, log)
	pc := poolctl.New(poolctl.Options{}, poolInf, vmInf, vmiInf, st.Pools, st.VMs, st.VMIs, log)
	// A deleted node's disk is gone with it: what it held for snapshots
	// and restores is let go instead of waited for.
	nodeGone := func(name string) bool { _, ok := nodeInf.Get("", name); return !ok }
	sc := snapctl.New(snapctl.Options{NodeGone: nodeGone, Classes: classInf}, snapInf, contentInf, vmInf, vmiInf, st.Snapshots, st.SnapshotContents, st.VMs, log)
	rc := restorectl.New(restorectl.Options{NodeGone: nodeGone}, restoreInf, snapInf, contentInf, vmInf, vmiInf, st.Restores, st.VMs, st.SnapshotContents, log)
	cc := clonectl.New(clonectl.Options{}, cloneInf, snapInf, restoreInf, vmInf, st.Clones, st.Snapshots, st.Restores, log)
	xc := exportctl.New(exportctl.Options{}, exportctl.Informers{
		Exports: exportInf, VMs: vmInf, VMIs: vmiInf, Nodes: nodeInf, Classes: classInf, Snaps: snapInf, Contents: contentInf,
	}, st.Exports, log)
	ac := adoptionctl.New(adoptionctl.Options{Validation: validation.Options{ImageDir: o.ImageDir, HostPolicy: o.HostPolicy}},
		adoptionInf, vmInf, st.Adoptions, st.VMs, log)
	// The RBD side of snapshots and restores, and what no object needs.
	svc := storagectl.NewVolumes(stc, storagectl.VolumeOptions{}, contentInf, restoreInf, snapInf, vmInf,
		st.SnapshotContents, st.Restores, log)
	runBackups := newBackupControllers(deps, o, backupInformers{snaps: snapInf, contents: contentInf, vms: vmInf, nodes: nodeInf, classes: classInf}, nodeGone, log)

	var wg sync.WaitGroup
	run := func(fn func()) {
		wg.Add(1)
		go func() { defer wg.Done(); fn() }()
	}
	run(func() { vmInf.Run(ctx) })
	run(func() { vmiInf.Run(ctx) })
	run(func() { nodeInf.Run(ctx) })
	run(func() { imageInf.Run(ctx) })
	run(func() { classInf.Run(ctx) })
	run(func() { migInf.Run(ctx) })
	run(func() { rsInf.Run(ctx) })
	run(func() { poolInf.Run(ctx) })
	run(func() { snapInf.Run(ctx) })
	run(func() { contentInf.Run(ctx) })
	run(func() { restoreInf.Run(ctx) })
	run(func() { cloneInf.Run(ctx) })
	run(func() { exportInf.Run(ctx) })
	run(func() { adoptionInf.Run(ctx) })
	run(func() { nsInf.Run(ctx) })
	// A new leader first backfills namespaces' objects and usage (an
	// upgraded cluster), then recomputes usage periodically.
	run(func() { newUsageReconciler(st, log).Run(ctx) })
	// Worker counts follow KubeVirt's (VM 3, VMI 10, node 3).
	run(func() { vmc.Run(ctx, max(co.VMWorkers, 1)) })
	run(func() { vmic.Run(ctx, max(co.VMIWorkers, 1)) })
	run(func() { nc.Run(ctx, max(co.NodeWorkers, 1)) })
	run(func() { stc.Run(ctx, 2) })
	run(func() { mc.Run(ctx, max(co.MigrationWorkers, 3)) })
	run(func() { ec.Run(ctx, 2) })
	// KubeVirt runs 3 workers for replica sets and pools.
	run(func() { rsc.Run(ctx, 3) })
	run(func() { pc.Run(ctx, 3) })
	// Snapshots, restores and clones are rare and their work is the
	// nodes': two workers each.
	run(func() { sc.Run(ctx, 2) })
	run(func() { rc.Run(ctx, 2) })
	run(func() { cc.Run(ctx, 2) })
	run(func() { xc.Run(ctx, 2) })
	run(func() { ac.Run(ctx, 1) })
	run(func() { svc.Run(ctx, 2) })
	runBackups(ctx, run)
	log.Info("controllers running")
	wg.Wait()
	log.Info("controllers stopped")
}

// newUsageReconciler is the namespace usage reconciler over the stores
// (the leader's, fenced): every namespaced kind says which namespaces are
// occupied, the charged kinds what they use.
func newUsageReconciler(st apiserver.Stores, log *slog.Logger) *nsusage.Reconciler {
	occupied := []func(context.Context) ([]string, error){
		nsusage.NamespacesOf(st.Migrations), nsusage.NamespacesOf(st.ReplicaSets), nsusage.NamespacesOf(st.Pools),
		nsusage.NamespacesOf(st.Snapshots), nsusage.NamespacesOf(st.SnapshotContents), nsusage.NamespacesOf(st.Restores),
		nsusage.NamespacesOf(st.Clones), nsusage.NamespacesOf(st.Exports), nsusage.NamespacesOf(st.Backups),
		nsusage.NamespacesOf(st.BackupSchedules), nsusage.NamespacesOf(st.BackupRestores), nsusage.NamespacesOf(st.Adoptions),
		nsusage.NamespacesOf(st.ServiceAccounts), nsusage.NamespacesOf(st.RoleBindings),
	}
	return nsusage.New(nsusage.Sources{Namespaces: st.Namespaces, VMs: st.VMs, VMIs: st.VMIs, Images: st.Images, Occupied: occupied},
		nsusage.Options{Logger: log.With("controller", "nsusage")})
}
