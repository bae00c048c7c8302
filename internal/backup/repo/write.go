package repo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"golang.org/x/sync/errgroup"
)

// uploader stores the chunks of one write: zeros are never stored, a
// chunk already known (in the base, or stored or found earlier in this
// write) is not stored again, and one found in the store is reused if it
// is fresh enough that GC cannot take it before the manifest names it.
type uploader struct {
	r     *Repo
	mu    sync.Mutex
	known map[string]bool
	stats WriteStats // BytesWritten and ChunksUploaded
}

func newUploader(r *Repo, base *Volume) *uploader {
	u := &uploader{r: r, known: map[string]bool{}}
	if base != nil {
		for _, c := range base.Chunks {
			if c != "" {
				u.known[c] = true
			}
		}
	}
	return u
}

// store is the name of chunk data ("" for zeros), stored if need be.
func (u *uploader) store(ctx context.Context, data []byte) (string, error) {
	if isZero(data) {
		return "", nil
	}
	hash := hashChunk(data)
	u.mu.Lock()
	known := u.known[hash]
	u.known[hash] = true // claimed: another worker with the same bytes reuses it
	u.mu.Unlock()
	if known {
		return hash, nil
	}
	// Another backup (of this VM or another) may have stored it. GC takes
	// unreferenced chunks older than its grace; one older than half of it
	// is put again, which renews it, rather than trusted to outlive this
	// write.
	info, err := u.r.store.Stat(ctx, chunkKey(hash))
	switch {
	case err == nil && info.ModTime.After(u.r.opts.Clock.Now().Add(-u.r.opts.GCGrace/2)):
		return hash, nil
	case err != nil && !errors.Is(err, ErrNotFound):
		return "", err
	}
	n, err := u.r.putChunk(ctx, hash, data)
	if err != nil {
		return "", err
	}
	u.mu.Lock()
	u.stats.BytesWritten += n
	u.stats.ChunksUploaded++
	u.mu.Unlock()
	return hash, nil
}

// finish is the stats of a write that made v: the chunks not uploaded
// and not zeros were reused.
func (u *uploader) finish(v *Volume, bytesRead int64) WriteStats {
	s := u.stats
	s.BytesRead = bytesRead
	s.ChunksTotal = len(v.Chunks)
	for _, c := range v.Chunks {
		if c == "" {
			s.ZeroChunks++
		}
	}
	s.ChunksReused = s.ChunksTotal - s.ZeroChunks - s.ChunksUploaded
	return s
}

// progress reports Done/Total from many goroutines, one call at a time.
type progress struct {
	mu   sync.Mutex
	fn   ProgressFunc
	done int64
	tot  int64
}

func (p *progress) add(n int64) {
	if p.fn == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done += n
	p.fn(Progress{Done: p.done, Total: p.tot})
}

// set reports done as the position reached (a stream's).
func (p *progress) set(done int64) {
	if p.fn == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if done > p.done {
		p.done = done
		p.fn(Progress{Done: p.done, Total: p.tot})
	}
}

// checkBase validates a write's base and is the chunk size of the
// volume written on it: the base's, so that chunk i of both covers the
// same bytes.
func (r *Repo) checkBase(base *Volume) (int64, error) {
	if base == nil {
		if err := CheckChunkSize(r.opts.ChunkSize); err != nil {
			return 0, fmt.Errorf("chunk size: %w", err)
		}
		return r.opts.ChunkSize, nil
	}
	if err := checkGeometry(base); err != nil {
		return 0, fmt.Errorf("base: %w", err)
	}
	return base.ChunkSize, nil
}

func checkSize(size, cs int64) error {
	if size <= 0 || size > MaxVolumeBytes {
		return fmt.Errorf("volume size %d is not in [1, %d]", size, int64(MaxVolumeBytes))
	}
	if n := chunkCount(size, cs); n > MaxChunks {
		return fmt.Errorf("volume of %d bytes is %d chunks of %d, at most %d", size, n, cs, MaxChunks)
	}
	return nil
}

// WriteRaw backs up a raw image: every chunk of src is read, hashed and,
// unless it is zeros (a hole or all-zero bytes: recorded as "", never
// stored) or already stored (in base at any index, or found in the
// store), compressed and put. Chunks outside src's data ranges are not
// read. The Volume it returns has SizeBytes, ChunkSize (base's, or
// Options.ChunkSize) and Chunks; the caller sets Name, StorageClass,
// ClassKind and Parent.
func (r *Repo) WriteRaw(ctx context.Context, src RawSource, base *Volume, p ProgressFunc) (*Volume, WriteStats, error) {
	cs, err := r.checkBase(base)
	if err != nil {
		return nil, WriteStats{}, err
	}
	size := src.Size()
	if err := checkSize(size, cs); err != nil {
		return nil, WriteStats{}, err
	}
	ranges, err := src.DataRanges()
	if err != nil {
		return nil, WriteStats{}, fmt.Errorf("data ranges: %w", err)
	}
	n := int(chunkCount(size, cs))
	hasData, err := chunksWithData(ranges, size, cs, n)
	if err != nil {
		return nil, WriteStats{}, err
	}
	v := &Volume{SizeBytes: size, ChunkSize: cs, Chunks: make([]string, n)}
	u := newUploader(r, base)
	prog := &progress{fn: p, tot: size}
	var bytesRead int64
	var readMu sync.Mutex

	jobs := make(chan int)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		defer close(jobs)
		for i := range n {
			if !hasData[i] {
				prog.add(chunkLen(size, cs, i))
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
			buf := make([]byte, cs)
			for i := range jobs {
				l := chunkLen(size, cs, i)
				data := buf[:l]
				if err := readFull(src, data, int64(i)*cs); err != nil {
					return fmt.Errorf("read chunk %d at %d: %w", i, int64(i)*cs, err)
				}
				readMu.Lock()
				bytesRead += l
				readMu.Unlock()
				h, err := u.store(gctx, data)
				if err != nil {
					return fmt.Errorf("chunk %d: %w", i, err)
				}
				v.Chunks[i] = h // each index has one writer
				prog.add(l)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, WriteStats{}, err
	}
	return v, u.finish(v, bytesRead), nil
}

// readFull reads len(p) bytes at off: io.ReaderAt may say io.EOF with
// the last bytes, which is no error here, but fewer bytes are.
func readFull(r io.ReaderAt, p []byte, off int64) error {
	n, err := r.ReadAt(p, off)
	if n == len(p) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// chunksWithData says which of the n chunks of cs bytes some data range
// touches; nil ranges are all data. The ranges must be sorted, not
// overlap and lie within size.
func chunksWithData(ranges []Range, size, cs int64, n int) ([]bool, error) {
	has := make([]bool, n)
	if ranges == nil {
		for i := range has {
			has[i] = true
		}
		return has, nil
	}
	var end int64
	for i, rg := range ranges {
		if rg.Offset < end || rg.Length <= 0 || rg.Offset > size || rg.Length > size-rg.Offset {
			return nil, fmt.Errorf("data range %d [%d, +%d) is out of order, empty or beyond the size %d", i, rg.Offset, rg.Length, size)
		}
		end = rg.Offset + rg.Length
		for c := rg.Offset / cs; c <= (end-1)/cs; c++ {
			has[c] = true
		}
	}
	return has, nil
}
