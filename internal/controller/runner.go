// Package controller holds the machinery every controller shares: a typed,
// rate-limited work queue of keys (client-go's workqueue), workers that call
// a Reconciler, and expectations so a controller does not act twice before
// its cache has seen its own writes.
package controller

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// Result tells the runner when to look at a key again.
type Result struct {
	// RequeueAfter > 0 requeues the key after that long, without counting
	// as a failure.
	RequeueAfter time.Duration
}

// Reconciler converges one key. A returned error requeues the key with
// per-key exponential backoff, unless it is a TerminalError.
type Reconciler interface {
	Reconcile(ctx context.Context, key string) (Result, error)
}

// ReconcileFunc adapts a function to Reconciler.
type ReconcileFunc func(ctx context.Context, key string) (Result, error)

// Reconcile calls f.
func (f ReconcileFunc) Reconcile(ctx context.Context, key string) (Result, error) { return f(ctx, key) }

type terminalError struct{ err error }

func (t terminalError) Error() string { return t.err.Error() }
func (t terminalError) Unwrap() error { return t.err }

// TerminalError marks an error that retrying will not fix (bad input): it
// is logged, and the key is not requeued.
func TerminalError(err error) error { return terminalError{err} }

// Queue is the typed work queue controllers use.
type Queue = workqueue.TypedRateLimitingInterface[string]

// NewQueue returns a queue with per-key exponential backoff (5 ms to
// 5 min) and an overall token bucket, as Kubernetes controllers use.
func NewQueue(name string) Queue {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedMaxOfRateLimiter(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 5*time.Minute),
			&workqueue.TypedBucketRateLimiter[string]{Limiter: newLimiter(500, 1000)},
		),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name},
	)
}

// Run starts workers goroutines that process keys from q with r until ctx
// ends; it then shuts the queue down and waits for the workers.
func Run(ctx context.Context, name string, q Queue, workers int, r Reconciler, log *slog.Logger) {
	log = log.With("controller", name)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for processNext(ctx, q, r, log) {
			}
		}()
	}
	<-ctx.Done()
	q.ShutDown()
	wg.Wait()
}

func processNext(ctx context.Context, q Queue, r Reconciler, log *slog.Logger) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	res, err := r.Reconcile(ctx, key)
	switch {
	case err == nil:
		q.Forget(key)
		if res.RequeueAfter > 0 {
			q.AddAfter(key, res.RequeueAfter)
		}
	case errors.As(err, new(terminalError)):
		q.Forget(key)
		log.Error("reconcile failed permanently", "key", key, "err", err)
	case ctx.Err() != nil:
		// Shutting down: the next leader picks the key up.
	default:
		log.Debug("reconcile failed; requeueing", "key", key, "err", err, "retries", q.NumRequeues(key))
		q.AddRateLimited(key)
	}
	return true
}

// WaitForSynced waits until every cache has synced and reports true, or
// until ctx ends: it then shuts q down and reports false. Controllers call
// it first in Run: no decision is made from a partial listing.
func WaitForSynced(ctx context.Context, q Queue, synced ...<-chan struct{}) bool {
	for _, s := range synced {
		select {
		case <-ctx.Done():
			q.ShutDown()
			return false
		case <-s:
		}
	}
	return true
}
