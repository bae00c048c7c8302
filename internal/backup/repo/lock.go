package repo

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/google/uuid"
	"k8s.io/utils/clock"
)

// lockDir holds the locks of backups being written: locks/<uuid>, a
// small JSON object with the time the writer started.
const lockDir = "locks/"

// maxLockBytes bounds what GC reads of a lock.
const maxLockBytes = 1024

// A Lock says that a backup is being written, from its first chunk to its
// manifest: while it is live, GC deletes no chunk younger than a grace
// before its start, so a backup that takes longer than the grace keeps
// the chunks it put (or found in the store) early on. It is renewed
// every quarter of Options.GCGrace and is live while renewed within
// GCGrace (a writer that died stops holding it). A lock can only make GC
// keep more, so one a target holds that virtplane did not write does no
// harm.
type Lock struct {
	r       *Repo
	key     string
	started time.Time
	stop    chan struct{}
	done    chan struct{}

	mu     sync.Mutex
	lastOK time.Time
	err    error // a renewal that came too late
}

type lockBody struct {
	Started time.Time `json:"started"`
}

// Lock takes a lock for a backup about to be written; Unlock it after
// its manifest is put (or the backup abandoned).
func (r *Repo) Lock(ctx context.Context) (*Lock, error) {
	now := r.opts.Clock.Now()
	l := &Lock{r: r, key: lockDir + uuid.NewString(), started: now, lastOK: now,
		stop: make(chan struct{}), done: make(chan struct{})}
	if err := l.put(ctx); err != nil {
		return nil, fmt.Errorf("backup lock: %w", err)
	}
	go l.renew(context.WithoutCancel(ctx))
	return l, nil
}

func (l *Lock) put(ctx context.Context) error {
	b, err := json.Marshal(lockBody{Started: l.started})
	if err != nil {
		return err
	}
	return l.r.store.Put(ctx, l.key, bytes.NewReader(b), int64(len(b)))
}

func (l *Lock) renew(ctx context.Context) {
	defer close(l.done)
	every := l.r.opts.GCGrace / 4
	var tick clock.Ticker
	if c, ok := l.r.opts.Clock.(clock.WithTicker); ok {
		tick = c.NewTicker(every)
	} else {
		tick = clock.RealClock{}.NewTicker(every)
	}
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C():
		}
		err := l.put(ctx)
		now := l.r.opts.Clock.Now()
		l.mu.Lock()
		switch {
		case err == nil && now.Sub(l.lastOK) < l.r.opts.GCGrace:
			l.lastOK = now
		case err == nil:
			l.err = fmt.Errorf("backup lock %s was not renewed for %s, longer than the GC grace: a GC may have deleted chunks of this backup (Verify it)", l.key, now.Sub(l.lastOK).Round(time.Second))
			l.lastOK = now
		default:
			l.r.log.Warn("backup repository: renewing a backup's lock", "key", l.key, "err", err)
		}
		l.mu.Unlock()
	}
}

// Unlock ends the lock and deletes it. Its error says whether the lock
// lapsed while held (it could not be renewed within the grace): then a
// GC may have taken chunks of the backup, which Verify tells.
func (l *Lock) Unlock(ctx context.Context) error {
	close(l.stop)
	<-l.done
	l.mu.Lock()
	err := l.err
	if err == nil && l.r.opts.Clock.Since(l.lastOK) >= l.r.opts.GCGrace {
		err = fmt.Errorf("backup lock %s was last renewed %s ago, longer than the GC grace: a GC may have deleted chunks of this backup (Verify it)", l.key, l.r.opts.Clock.Since(l.lastOK).Round(time.Second))
	}
	l.mu.Unlock()
	if derr := l.r.store.Delete(ctx, l.key); derr != nil && err == nil {
		err = derr
	}
	return err
}

// oldestLiveLock is the start of the oldest live lock (renewed within
// grace), or the zero time when there is none. A live lock GC cannot
// read or parse counts as started at the beginning of time: GC then
// deletes nothing, rather than guess.
func (r *Repo) oldestLiveLock(ctx context.Context, now time.Time, grace time.Duration) (time.Time, error) {
	var oldest time.Time
	var live []ObjectInfo
	err := r.store.List(ctx, lockDir, func(o ObjectInfo) error {
		if o.ModTime.After(now.Add(-grace)) {
			live = append(live, o)
		}
		return nil
	})
	if err != nil {
		return time.Time{}, err
	}
	for _, o := range live {
		started := time.Unix(0, 0)
		if b, ok := r.readLock(ctx, o.Key); ok && !b.Started.IsZero() {
			started = b.Started
		}
		if oldest.IsZero() || started.Before(oldest) {
			oldest = started
		}
	}
	return oldest, nil
}

func (r *Repo) readLock(ctx context.Context, key string) (lockBody, bool) {
	rc, err := r.store.Get(ctx, key)
	if err != nil {
		return lockBody{}, false
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxLockBytes+1))
	var b lockBody
	if err != nil || len(data) > maxLockBytes || json.Unmarshal(data, &b) != nil {
		return lockBody{}, false
	}
	return b, true
}
