package repo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// GCStats is what GC did.
type GCStats struct {
	Manifests        int   // manifests read
	ChunksReferenced int   // distinct chunks they name
	ChunksDeleted    int   // unreferenced chunks deleted
	BytesDeleted     int64 // their stored size
	ChunksKept       int   // unreferenced chunks younger than the grace
}

// GC deletes the chunks that no manifest names and that are older than
// grace (0: Options.GCGrace): a backup being written has stored chunks
// that its manifest, not yet put, will name. While a backup holds a Lock,
// the grace counts from before its start instead, so a backup longer than
// the grace loses nothing. A manifest that cannot be read stops it before
// anything is deleted. Objects under chunks/ that are not chunk keys are
// left alone.
func (r *Repo) GC(ctx context.Context, grace time.Duration) (GCStats, error) {
	if grace <= 0 {
		grace = r.opts.GCGrace
	}
	var st GCStats
	live := map[string]bool{}
	err := r.eachManifest(ctx, func(m *Manifest, _ string) error {
		st.Manifests++
		for i := range m.Volumes {
			for _, c := range m.Volumes[i].Chunks {
				if c != "" {
					live[c] = true
				}
			}
		}
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("gc: reading the manifests: %w", err)
	}
	st.ChunksReferenced = len(live)
	// Listed after the manifests were read: a chunk a manifest put since
	// names is younger than the grace, or was named before, or belongs to
	// a backup that holds a lock (Lock): no chunk younger than a grace
	// before the oldest live lock's start is deleted.
	now := r.opts.Clock.Now()
	cutoff := now.Add(-grace)
	// A lock is renewed every quarter of Options.GCGrace: live within
	// that grace, whatever this GC's own.
	oldest, err := r.oldestLiveLock(ctx, now, max(grace, r.opts.GCGrace))
	if err != nil {
		return st, fmt.Errorf("gc: reading the backups' locks: %w", err)
	}
	if !oldest.IsZero() && oldest.Add(-grace).Before(cutoff) {
		cutoff = oldest.Add(-grace)
	}
	var dead []ObjectInfo
	err = r.store.List(ctx, chunkDir, func(o ObjectInfo) error {
		h, ok := parseChunkKey(o.Key)
		switch {
		case !ok || live[h]:
		case o.ModTime.After(cutoff):
			st.ChunksKept++
		default:
			dead = append(dead, o)
		}
		return nil
	})
	if err != nil {
		return st, fmt.Errorf("gc: listing the chunks: %w", err)
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.opts.Concurrency)
	for _, o := range dead {
		g.Go(func() error {
			if err := r.store.Delete(gctx, o.Key); err != nil {
				return err
			}
			mu.Lock()
			st.ChunksDeleted++
			st.BytesDeleted += o.Size
			mu.Unlock()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return st, fmt.Errorf("gc: %w", err)
	}
	r.log.Info("backup repository: garbage collected", "manifests", st.Manifests, "chunks_referenced", st.ChunksReferenced,
		"chunks_deleted", st.ChunksDeleted, "bytes_deleted", st.BytesDeleted, "chunks_kept", st.ChunksKept)
	return st, nil
}

// maxVerifyErrors bounds the errors Verify reports (a target that lost
// everything would otherwise make one per chunk).
const maxVerifyErrors = 20

// Verify reads every chunk backup id names and checks it: nil when every
// one is present and intact, else an error naming each that is not (up
// to 20; errors.Is(err, ErrCorrupt)).
func (r *Repo) Verify(ctx context.Context, id string) error {
	m, err := r.GetManifest(ctx, id)
	if err != nil {
		return err
	}
	type ref struct {
		hash, volume string
		n            int64
	}
	seen := map[string]bool{}
	var refs []ref
	for i := range m.Volumes {
		v := &m.Volumes[i]
		for j, c := range v.Chunks {
			if c != "" && !seen[c] {
				seen[c] = true
				refs = append(refs, ref{c, v.Name, chunkLen(v.SizeBytes, v.ChunkSize, j)})
			}
		}
	}
	var mu sync.Mutex
	var errs []error
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.opts.Concurrency)
	for _, rf := range refs {
		g.Go(func() error {
			_, err := r.getChunk(gctx, rf.hash, rf.n, rf.volume, nil)
			var ce *CorruptError
			if errors.As(err, &ce) {
				mu.Lock()
				defer mu.Unlock()
				if len(errs) < maxVerifyErrors {
					errs = append(errs, err)
				}
				return nil
			}
			return err // the store failed: no verdict
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("verify backup %s: %w", id, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("backup %s: %w", id, errors.Join(errs...))
	}
	return nil
}
