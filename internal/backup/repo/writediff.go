package repo

import (
	"context"
	"errors"
	"fmt"
	"io"

	"golang.org/x/sync/errgroup"

	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo/rbddiff"
)

// WriteRBDDiff backs up an rbd image from the stdout of `rbd export-diff
// [--from-snap S] --whole-object pool/img@snap -` (format v1). With
// base nil the diff must be a full one (no --from-snap); with a base it
// must start from base's snapshot (Volume.Snapshot): chunks the diff does
// not name keep base's hash. A write that does not cover whole chunks is
// merged onto base's chunk (fetched and verified), so the result is
// always whole chunks; with the image's object size equal to the chunk
// size (4 MiB, both defaults) and --whole-object, none is. The Volume it
// returns has SizeBytes (the diff's size record), ChunkSize, Chunks and
// Snapshot (the diff's end snapshot); the caller sets the rest.
// Progress counts the image's bytes passed.
func (r *Repo) WriteRBDDiff(ctx context.Context, diff io.Reader, base *Volume, p ProgressFunc) (*Volume, WriteStats, error) {
	cs, err := r.checkBase(base)
	if err != nil {
		return nil, WriteStats{}, err
	}
	d, err := rbddiff.NewReader(diff)
	if err != nil {
		return nil, WriteStats{}, err
	}
	w := &diffWriter{r: r, base: base, cs: cs, cur: -1, prog: &progress{fn: p}, u: newUploader(r, base)}
	g, gctx := errgroup.WithContext(ctx)
	w.ctx = gctx
	w.work = make(chan chunkJob)
	w.bufs = make(chan []byte, r.opts.Concurrency+1)
	for range r.opts.Concurrency + 1 {
		w.bufs <- make([]byte, cs)
	}
	for range r.opts.Concurrency {
		g.Go(w.storeChunks)
	}
	g.Go(func() error {
		defer close(w.work)
		return w.read(d)
	})
	if err := g.Wait(); err != nil {
		return nil, WriteStats{}, err
	}
	return w.v, w.u.finish(w.v, w.bytesRead), nil
}

// diffWriter turns a diff's records into chunks, one pass: the records
// are in order, so a chunk is done when a record passes it.
type diffWriter struct {
	r    *Repo
	ctx  context.Context
	base *Volume
	cs   int64
	v    *Volume
	u    *uploader
	prog *progress

	from, to string
	reshape  map[int]bool // base chunks whose length the size record changed

	cur     int        // the chunk being made, or -1
	buf     []byte     // its bytes
	covered [][2]int64 // the ranges of it the diff wrote, in order

	work      chan chunkJob
	bufs      chan []byte
	bytesRead int64
}

type chunkJob struct {
	i    int
	data []byte
	buf  []byte // to give back to bufs
}

func (w *diffWriter) read(d *rbddiff.Reader) error {
	started := false
	for {
		rec, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		switch rec.Tag {
		case rbddiff.TagFromSnap:
			w.from = rec.Name
		case rbddiff.TagToSnap:
			w.to = rec.Name
		case rbddiff.TagSize:
		case rbddiff.TagWrite, rbddiff.TagZero:
			if !started {
				if err := w.start(d); err != nil {
					return err
				}
				started = true
			}
			if err := w.record(rec); err != nil {
				return err
			}
		}
	}
	if !started {
		if err := w.start(d); err != nil {
			return err
		}
	}
	if err := w.flush(); err != nil {
		return err
	}
	// Base chunks the new size cut or extended, which the diff did not
	// write, are made again from the base.
	for i := range len(w.v.Chunks) {
		if w.reshape[i] {
			if err := w.begin(i); err != nil {
				return err
			}
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	w.prog.set(w.v.SizeBytes)
	return nil
}

// start checks the metadata records against the base and lays out the
// volume: base's chunks where the size leaves them whole.
func (w *diffWriter) start(d *rbddiff.Reader) error {
	usize, ok := d.Size()
	if !ok {
		return fmt.Errorf("%w: no size record", rbddiff.ErrFormat)
	}
	size := int64(usize)
	if err := checkSize(size, w.cs); err != nil {
		return err
	}
	switch {
	case w.base == nil && w.from != "":
		return fmt.Errorf("the export-diff starts from snapshot %q: an incremental diff needs the backup of that snapshot as its base", w.from)
	case w.base != nil && w.from == "":
		return errors.New("the export-diff is a full one (no --from-snap): it cannot be written onto a base, whose data it does not clear")
	case w.base != nil && w.base.Snapshot != "" && w.from != w.base.Snapshot:
		return fmt.Errorf("the export-diff starts from snapshot %q, but the base was backed up from %q", w.from, w.base.Snapshot)
	}
	if w.to != "" && !isSnapshotName(w.to) {
		return fmt.Errorf("the export-diff's end snapshot %q is not 1 to %d of [A-Za-z0-9._-], starting with a letter or digit", clip(w.to), maxSnapshotName)
	}
	n := int(chunkCount(size, w.cs))
	w.v = &Volume{SizeBytes: size, ChunkSize: w.cs, Chunks: make([]string, n), Snapshot: w.to}
	w.prog.tot = size
	w.reshape = map[int]bool{}
	if w.base != nil {
		for i := range min(n, len(w.base.Chunks)) {
			w.v.Chunks[i] = w.base.Chunks[i]
			if w.base.Chunks[i] != "" && chunkLen(w.base.SizeBytes, w.cs, i) != chunkLen(size, w.cs, i) {
				w.reshape[i] = true
			}
		}
	}
	return nil
}

// record applies one data record, chunk by chunk.
func (w *diffWriter) record(rec rbddiff.Record) error {
	off, end := int64(rec.Offset), int64(rec.Offset+rec.Length)
	for off < end {
		i := int(off / w.cs)
		if i != w.cur {
			if err := w.flush(); err != nil {
				return err
			}
			if err := w.begin(i); err != nil {
				return err
			}
		}
		lo := off - int64(i)*w.cs
		hi := min(end-int64(i)*w.cs, int64(len(w.buf)))
		seg := w.buf[lo:hi]
		if rec.Tag == rbddiff.TagWrite {
			if _, err := io.ReadFull(rec.Data, seg); err != nil {
				return fmt.Errorf("%w: data at %d: %v", rbddiff.ErrFormat, off, err)
			}
			w.bytesRead += int64(len(seg))
		} else {
			clear(seg)
		}
		w.covered = append(w.covered, [2]int64{lo, hi})
		off += hi - lo
		w.prog.set(off)
	}
	return nil
}

// begin starts chunk i: a buffer of zeros, nothing covered.
func (w *diffWriter) begin(i int) error {
	select {
	case w.buf = <-w.bufs:
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
	w.cur = i
	w.buf = w.buf[:chunkLen(w.v.SizeBytes, w.cs, i)]
	clear(w.buf)
	w.covered = w.covered[:0]
	return nil
}

// flush finishes the chunk being made: what the diff did not cover comes
// from the base's chunk (zeros where it has none), then it is stored.
func (w *diffWriter) flush() error {
	if w.cur < 0 {
		return nil
	}
	i := w.cur
	w.cur = -1
	delete(w.reshape, i)
	var done int64
	for _, c := range w.covered {
		done += c[1] - c[0]
	}
	if done < int64(len(w.buf)) && w.base != nil && i < len(w.base.Chunks) && w.base.Chunks[i] != "" {
		bl := chunkLen(w.base.SizeBytes, w.cs, i)
		old, err := w.r.getChunk(w.ctx, w.base.Chunks[i], bl, "", nil)
		if err != nil {
			return fmt.Errorf("base chunk %d, to merge a partial write onto: %w", i, err)
		}
		old = old[:min(len(old), len(w.buf))] // the image shrank: cut it
		var at int64
		for _, c := range append(w.covered, [2]int64{int64(len(w.buf)), int64(len(w.buf))}) {
			if at < c[0] && at < int64(len(old)) {
				copy(w.buf[at:c[0]], old[at:])
			}
			at = c[1]
		}
	}
	select {
	case w.work <- chunkJob{i: i, data: w.buf, buf: w.buf[:cap(w.buf)]}:
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
	w.buf = nil
	return nil
}

// storeChunks stores the chunks flush hands it.
func (w *diffWriter) storeChunks() error {
	for j := range w.work {
		h, err := w.u.store(w.ctx, j.data)
		if err != nil {
			return fmt.Errorf("chunk %d: %w", j.i, err)
		}
		w.v.Chunks[j.i] = h
		w.bufs <- j.buf
	}
	return nil
}
