// Package nodework is the node agent's share of the objects the control
// plane labels with a node's name for it to act on (snapshot contents,
// restores): an informer of this node's objects, a work queue, the long
// work under way by key (so that an object deleted or given up meanwhile
// stops it), and status writes that remember the node's own last write.
package nodework

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Options configure a Worker.
type Options[T store.Object] struct {
	// Name names the queue and the informer in logs ("restore").
	Name string
	// Kind names the objects in errors ("snapshot content").
	Kind string
	// Watch lists and watches the objects labelled with this node.
	Watch informer.Watcher[T]
	// Selector selects this node's objects.
	Selector string
	// Stops reports an object whose work under way must stop (deleted,
	// given up): the informer's updates cancel it.
	Stops func(T) bool
	// UpdateStatus writes an object's status (and the node's finalizer).
	UpdateStatus func(ctx context.Context, obj T) (T, error)
	// InitStatus gives a copy a non-nil status before it is mutated.
	InitStatus func(T)
	// CallTimeout bounds one status write.
	CallTimeout time.Duration
	Logger      *slog.Logger
}

// Worker is the informer, the queue and the bookkeeping of one kind.
type Worker[T store.Object] struct {
	opts  Options[T]
	Inf   *informer.Informer[T]
	queue controller.Queue
	log   *slog.Logger

	underWay
	// written keeps passes over a cached copy older than the node's own
	// last write from redoing finished work.
	written ownWrites
}

// New returns a worker whose informer queues every change, cancelling
// the work under way of an object that Stops or is deleted.
func New[T store.Object](opts Options[T]) *Worker[T] {
	w := &Worker[T]{
		opts:  opts,
		Inf:   informer.New[T](opts.Watch, store.ListOptions{LabelSelector: opts.Selector}, opts.Logger.With("informer", opts.Name)),
		queue: controller.NewQueue(opts.Name),
		log:   opts.Logger,
	}
	enqueue := func(o T) {
		key := informer.Key(o)
		if opts.Stops(o) {
			w.cancel(key)
		}
		w.queue.Add(key)
	}
	w.Inf.AddHandler(informer.Handler[T]{
		OnAdd:    enqueue,
		OnUpdate: func(_, o T) { enqueue(o) },
		OnDelete: func(o T) { w.cancel(informer.Key(o)); w.queue.Add(informer.Key(o)) },
	})
	return w
}

// Run runs the informer and, once it has synced, the loops (each until
// ctx ends) and workers reconciling the queue, in the background; the
// returned func stops them.
func (w *Worker[T]) Run(ctx context.Context, workers int, r controller.Reconciler, loops ...func(context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { w.Inf.Run(ctx) })
	wg.Go(func() {
		select {
		case <-w.Inf.Synced():
		case <-ctx.Done():
			return
		}
		var running sync.WaitGroup
		for _, loop := range loops {
			running.Go(func() { loop(ctx) })
		}
		controller.Run(ctx, w.opts.Name, w.queue, workers, r, w.log)
		running.Wait()
	})
	return func() {
		cancel()
		w.queue.ShutDown()
		wg.Wait()
	}
}

// Stale reports whether o is a cached copy older than the node's own
// last write of it: the watch brings that write, and queues it again.
func (w *Worker[T]) Stale(o T) bool {
	return w.written.stale(o.GetMetadata().GetUid(), o.GetMetadata().GetResourceVersion())
}

// Enqueue asks for a pass over key.
func (w *Worker[T]) Enqueue(key string) { w.queue.Add(key) }

// Forget drops what the worker remembers of uid (its object is gone, or
// the node has nothing more to do for it).
func (w *Worker[T]) Forget(uid string) { w.written.forget(uid) }

// Start registers work for key under ctx; the returned func unregisters
// it (call it when the work ends). An update that Stops the object, or
// its deletion, cancels the context.
func (w *Worker[T]) Start(ctx context.Context, key string) (context.Context, func()) {
	return w.start(ctx, key)
}

// WriteStatus writes o's status as mutate changes it (mutate gets a copy
// with a non-nil status). A conflict is retried once on the informer's
// newer copy; otherwise the queue retries.
func (w *Worker[T]) WriteStatus(ctx context.Context, o T, mutate func(T)) (T, error) {
	var zero T
	for attempt := 0; ; attempt++ {
		next := proto.Clone(o).(T)
		w.opts.InitStatus(next)
		mutate(next)
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.opts.CallTimeout)
		out, err := w.opts.UpdateStatus(cctx, next)
		cancel()
		if err == nil {
			w.written.wrote(out.GetMetadata().GetUid(), out.GetMetadata().GetResourceVersion())
			return out, nil
		}
		if status.Code(err) != codes.Aborted || attempt > 0 {
			return zero, fmt.Errorf("writing the status of %s %s: %w", w.opts.Kind, informer.Key(o), err)
		}
		fresh, ok := w.Inf.GetByKey(informer.Key(o))
		if !ok || fresh.GetMetadata().GetResourceVersion() <= o.GetMetadata().GetResourceVersion() || fresh.GetMetadata().GetUid() != o.GetMetadata().GetUid() {
			return zero, fmt.Errorf("writing the status of %s %s: %w", w.opts.Kind, informer.Key(o), err)
		}
		o = fresh
	}
}
