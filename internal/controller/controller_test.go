package controller

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"
)

func TestRunnerRetriesRequeuesAndStops(t *testing.T) {
	q := NewQueue("test")
	var mu sync.Mutex
	calls := map[string]int{}
	done := make(chan struct{})
	r := ReconcileFunc(func(_ context.Context, key string) (Result, error) {
		mu.Lock()
		defer mu.Unlock()
		calls[key]++
		n := calls[key]
		switch key {
		case "flaky":
			if n < 3 {
				return Result{}, errors.New("transient")
			}
		case "bad":
			return Result{}, TerminalError(errors.New("bad input"))
		case "poll":
			if n < 2 {
				return Result{RequeueAfter: 20 * time.Millisecond}, nil
			}
		}
		if calls["flaky"] >= 3 && calls["poll"] >= 2 && calls["bad"] >= 1 {
			select {
			case <-done:
			default:
				close(done)
			}
		}
		return Result{}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() {
		Run(ctx, "test", q, 2, r, slog.New(slog.NewTextHandler(io.Discard, nil)))
		close(stopped)
	}()
	for _, k := range []string{"flaky", "bad", "poll"} {
		q.Add(k)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("not converged: %v", calls)
	}
	// Once the runner stopped, every result has been handled: a terminal
	// error or a success is forgotten by the rate limiter, so a retry
	// still pending would show as a requeue.
	cancel()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("runner did not stop")
	}
	mu.Lock()
	defer mu.Unlock()
	if calls["bad"] != 1 {
		t.Errorf("terminal error retried: %d calls", calls["bad"])
	}
	if calls["flaky"] != 3 || calls["poll"] != 2 {
		t.Errorf("calls %v", calls)
	}
	for _, k := range []string{"flaky", "bad", "poll"} {
		if n := q.NumRequeues(k); n != 0 {
			t.Errorf("%s left with %d requeues", k, n)
		}
	}
}

func TestExpectations(t *testing.T) {
	now := time.Unix(0, 0)
	e := NewExpectations(func() time.Time { return now })
	if !e.Satisfied("k") {
		t.Fatal("empty not satisfied")
	}
	e.ExpectCreations("k", 1)
	e.ExpectDeletions("k", 1)
	if e.Satisfied("k") {
		t.Fatal("pending satisfied")
	}
	e.CreationObserved("k")
	if a, d := e.Pending("k"); a != 0 || d != 1 || e.Satisfied("k") {
		t.Fatalf("after creation: %d %d", a, d)
	}
	e.DeletionObserved("k")
	if !e.Satisfied("k") {
		t.Fatal("not satisfied after both observed")
	}
	e.DeletionObserved("k") // an extra observation must not go negative
	e.ExpectCreations("k", 1)
	if e.Satisfied("k") {
		t.Fatal("extra observation ate an expectation")
	}
	now = now.Add(ExpectationsTTL + time.Second)
	if !e.Satisfied("k") {
		t.Fatal("expired expectation still blocks")
	}
}
