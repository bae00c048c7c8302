package backup

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/target"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
)

// TargetStore writes a target's status, keeping every other writer's
// change.
type TargetStore interface {
	GuaranteedUpdate(ctx context.Context, namespace, name string, fn func(*apiv1.BackupTarget) (*apiv1.BackupTarget, error)) (*apiv1.BackupTarget, error)
}

// TargetCache is the cache of open target stores (target.Cache): a
// probe goes through it, and a deleted target is dropped from it.
type TargetCache interface {
	Targets
	Forget(name string)
}

// DefaultProbeInterval is how often each target is probed again.
const DefaultProbeInterval = time.Minute

// TargetProbes is the target controller: each BackupTarget is probed
// (a probe object written, read back and deleted by the server) when it
// changes and every ProbeInterval, and its Ready condition says how it
// went, naming the field to look at.
type TargetProbes struct {
	opts     Options
	interval time.Duration
	inf      *informer.Informer[*apiv1.BackupTarget]
	st       TargetStore
	cache    TargetCache
	queue    controller.Queue
	log      *slog.Logger
}

// NewTargetProbes registers the controller's handlers; interval 0 is
// DefaultProbeInterval.
func NewTargetProbes(opts Options, interval time.Duration, inf *informer.Informer[*apiv1.BackupTarget], st TargetStore, cache TargetCache, log *slog.Logger) *TargetProbes {
	opts.complete()
	if interval <= 0 {
		interval = DefaultProbeInterval
	}
	if log == nil {
		log = slog.Default()
	}
	c := &TargetProbes{opts: opts, interval: interval, inf: inf, st: st, cache: cache, queue: controller.NewQueue("backup-target"), log: log.With("controller", "backup-target")}
	inf.AddHandler(informer.Handler[*apiv1.BackupTarget]{
		OnAdd: func(t *apiv1.BackupTarget) { c.queue.Add(informer.Key(t)) },
		OnUpdate: func(old, t *apiv1.BackupTarget) {
			if !proto.Equal(old.GetSpec(), t.GetSpec()) {
				c.queue.Add(informer.Key(t))
			}
		},
		OnDelete: func(t *apiv1.BackupTarget) { cache.Forget(t.GetMetadata().GetName()) },
	})
	return c
}

// Run probes targets with workers goroutines until ctx ends.
func (c *TargetProbes) Run(ctx context.Context, workers int) {
	if !controller.WaitForSynced(ctx, c.queue, c.inf.Synced()) {
		return
	}
	controller.Run(ctx, "backup-target", c.queue, workers, c, c.log)
}

// Reconcile probes one target and records the outcome.
func (c *TargetProbes) Reconcile(ctx context.Context, key string) (controller.Result, error) {
	t, ok := c.inf.GetByKey(key)
	if !ok {
		return controller.Result{}, nil
	}
	name := t.GetMetadata().GetName()
	start := c.opts.Clock.Now()
	pctx, cancel := context.WithTimeout(ctx, 2*target.OpenTimeout)
	st, err := c.cache.Store(pctx, t)
	if err == nil {
		err = target.Probe(pctx, st)
	}
	cancel()
	if err != nil {
		// A store that failed may hold a stale connection: opened anew
		// next time.
		c.cache.Forget(name)
	}
	now := c.opts.Clock.Now()
	ready := target.Condition(t, err, now)
	if old := apiv1.FindCondition(t.GetStatus().GetConditions(), apiv1.ConditionReady); old.GetStatus() != ready.Status || old.GetReason() != ready.Reason {
		c.log.Info("backup target", "target", name, "ready", ready.Status, "reason", ready.Reason, "message", ready.Message, "probe_took", now.Sub(start))
	}
	_, werr := c.st.GuaranteedUpdate(ctx, "", name, func(cur *apiv1.BackupTarget) (*apiv1.BackupTarget, error) {
		if cur.Status == nil {
			cur.Status = &apiv1.BackupTargetStatus{}
		}
		cur.Status.Conditions = apiv1.SetCondition(cur.Status.Conditions, ready, now)
		return cur, nil
	})
	if werr != nil {
		return controller.Result{}, fmt.Errorf("backup target %s: %w", name, werr)
	}
	return controller.Result{RequeueAfter: c.interval}, nil
}
