package repo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// A backup that takes longer than the GC grace keeps its early chunks
// while it holds a lock; once the lock is gone, GC takes them.
func TestLockKeepsALongBackupsChunks(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	// The backup started 3 hours ago (the lock says so) and put its
	// chunks then; the lock was renewed since (its object is fresh).
	clk := clocktesting.NewFakePassiveClock(now.Add(-3 * time.Hour))
	r := New(s, Options{ChunkSize: MinChunkSize, Clock: clk})
	l, err := r.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "v.raw")
	sparseVolume(t, path, 4*MinChunkSize, []Range{{0, 4 * MinChunkSize}}, 1)
	v, _ := writeRawFile(ctx, t, r, path, nil, nil)
	for _, c := range v.Chunks {
		old := now.Add(-3*time.Hour + time.Minute)
		if err := os.Chtimes(filepath.Join(root, chunkKey(c)), old, old); err != nil {
			t.Fatal(err)
		}
	}
	clk.SetTime(now)
	st, err := r.GC(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.ChunksDeleted != 0 || st.ChunksKept != 4 {
		t.Errorf("GC while a 3-hour backup holds its lock: %+v, want its 4 chunks kept", st)
	}
	// The lock was never renewed by this process (no ticker on a
	// passive clock): Unlock says it lapsed.
	if err := l.Unlock(ctx); err == nil || !strings.Contains(err.Error(), "Verify") {
		t.Errorf("Unlock of a lock not renewed for 3 hours: %v, want an error", err)
	}
	st, err = r.GC(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.ChunksDeleted != 4 {
		t.Errorf("GC after the lock is gone: %+v, want the 4 unreferenced chunks deleted", st)
	}
}

// A lock is renewed on the clock's ticks, and Unlock after timely
// renewals is clean. A stale lock (not renewed within the grace) holds
// nothing back.
func TestLockRenewal(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	r := New(s, Options{Clock: clk})
	l, err := r.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var key string
	_ = s.List(ctx, lockDir, func(o ObjectInfo) error { key = o.Key; return nil })
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(filepath.Join(root, key), old, old); err != nil {
		t.Fatal(err)
	}
	info := func() ObjectInfo {
		i, err := s.Stat(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return i
	}
	for range 3 {
		testutil.Eventually(t, 10*time.Second, "the lock's ticker armed", clk.HasWaiters)
		clk.Step(DefaultGCGrace / 4)
	}
	testutil.Eventually(t, 10*time.Second, "the lock renewed on the clock's ticks", func() bool {
		return info().ModTime.After(old.Add(time.Minute))
	})
	if err := l.Unlock(ctx); err != nil {
		t.Errorf("Unlock after timely renewals: %v", err)
	}
	if _, err := s.Stat(ctx, key); err == nil {
		t.Error("Unlock left the lock")
	}
}
