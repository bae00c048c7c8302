package repo

import (
	"context"
	"fmt"
	"io"

	"golang.org/x/sync/errgroup"

	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo/rbddiff"
)

// RestoreRaw writes every non-zero chunk of v to dst, which the caller
// made a sparse file of v.SizeBytes (zeros need no writing), verifying
// each chunk before a byte of it is written: a missing, truncated or
// altered chunk is ErrCorrupt naming the chunk's key and the volume.
// On an error dst holds part of the volume: the caller deletes it (a
// restore makes a new volume, never writes over a live one).
func (r *Repo) RestoreRaw(ctx context.Context, v *Volume, dst io.WriterAt, p ProgressFunc) error {
	if err := checkGeometry(v); err != nil {
		return err
	}
	prog := &progress{fn: p, tot: v.SizeBytes}
	jobs := make(chan int)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(jobs)
		for i, c := range v.Chunks {
			if c == "" {
				prog.add(chunkLen(v.SizeBytes, v.ChunkSize, i))
				continue
			}
			select {
			case jobs <- i:
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	for range r.opts.Concurrency {
		g.Go(func() error {
			var buf []byte
			for i := range jobs {
				l := chunkLen(v.SizeBytes, v.ChunkSize, i)
				data, err := r.getChunk(gctx, v.Chunks[i], l, v.Name, buf)
				if err != nil {
					return err
				}
				buf = data
				if _, err := dst.WriteAt(data, int64(i)*v.ChunkSize); err != nil {
					return fmt.Errorf("write chunk %d of volume %q: %w", i, v.Name, err)
				}
				prog.add(l)
			}
			return nil
		})
	}
	return g.Wait()
}

// RestoreRBDDiff writes v as an export-diff v1 stream, for `rbd
// import-diff - pool/img` onto a new, empty image: the size record and
// one data record per non-zero chunk, each verified before it is
// written (zero chunks are left out: a new image reads zeros there). No
// snapshot records: import-diff would make the end snapshot. On an error
// the stream ends without its end record, so import-diff fails; the
// caller deletes the image.
func (r *Repo) RestoreRBDDiff(ctx context.Context, v *Volume, w io.Writer, p ProgressFunc) error {
	if err := checkGeometry(v); err != nil {
		return err
	}
	prog := &progress{fn: p, tot: v.SizeBytes}
	dw := rbddiff.NewWriter(w)
	if err := dw.Size(uint64(v.SizeBytes)); err != nil {
		return err
	}
	type result struct {
		data []byte
		err  error
	}
	// Chunks are fetched Concurrency at a time and written in order:
	// each fetch has its slot in pending, which the writer takes in turn.
	pending := make(chan chan result, r.opts.Concurrency)
	bufs := make(chan []byte, r.opts.Concurrency+2)
	for range r.opts.Concurrency + 2 {
		bufs <- nil
	}
	gctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		defer close(pending)
		for i, c := range v.Chunks {
			if c == "" {
				continue
			}
			var buf []byte
			select {
			case buf = <-bufs:
			case <-gctx.Done():
				return
			}
			slot := make(chan result, 1)
			select {
			case pending <- slot:
			case <-gctx.Done():
				return
			}
			go func() {
				data, err := r.getChunk(gctx, c, chunkLen(v.SizeBytes, v.ChunkSize, i), v.Name, buf)
				slot <- result{data, err}
			}()
		}
	}()
	var err error
	i := 0
	for slot := range pending {
		res := <-slot
		if err != nil {
			continue // draining after an error
		}
		for v.Chunks[i] == "" {
			prog.add(chunkLen(v.SizeBytes, v.ChunkSize, i))
			i++
		}
		if res.err != nil {
			err = res.err
			cancel()
			continue
		}
		if werr := dw.Write(uint64(int64(i)*v.ChunkSize), res.data); werr != nil {
			err = fmt.Errorf("write chunk %d of volume %q: %w", i, v.Name, werr)
			cancel()
			continue
		}
		prog.add(int64(len(res.data)))
		i++
		bufs <- res.data
	}
	if err != nil {
		return err // no end record: import-diff fails
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for ; i < len(v.Chunks); i++ {
		prog.add(chunkLen(v.SizeBytes, v.ChunkSize, i))
	}
	return dw.End()
}
