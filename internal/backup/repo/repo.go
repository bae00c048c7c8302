package repo

import (
	"context"
	"io"
	"log/slog"
	"time"

	"k8s.io/utils/clock"
)

// DefaultChunkSize is RBD's default object size: an `rbd export-diff
// --whole-object` of an image made with the defaults names whole chunks,
// so an rbd volume's incremental backup never reads a chunk back.
const DefaultChunkSize = 4 << 20

// Bounds of a chunk size: a power of two in [MinChunkSize, MaxChunkSize].
const (
	MinChunkSize = 64 << 10
	MaxChunkSize = 64 << 20
)

// DefaultGCGrace is how old an unreferenced chunk must be before GC
// deletes it: a backup being written names its chunks before its
// manifest exists, so the grace must be longer than the longest backup.
const DefaultGCGrace = time.Hour

// Options are a Repo's settings; the zero value of each is its default.
type Options struct {
	// ChunkSize of the volumes this Repo writes (default 4 MiB). What it
	// reads takes the chunk size each volume's manifest names.
	ChunkSize int64
	// Clock gives the time of manifests' Created and of GC (default the
	// real clock).
	Clock clock.PassiveClock
	// Concurrency is how many chunks are read, hashed, compressed and
	// sent (or fetched and checked) at once (default 4).
	Concurrency int
	// GCGrace is the grace of GC(ctx, 0) and how fresh a chunk that is
	// only in the store (in no base) must be for a writer to reuse it
	// rather than put it again (half of it): GC cannot take a chunk a
	// backup is about to name. Default DefaultGCGrace.
	GCGrace time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Repo reads and writes backups in a Store.
type Repo struct {
	store Store
	opts  Options
	log   *slog.Logger
}

// New is a repository over store. It writes nothing: a repository is
// its objects, and an empty store is an empty repository.
func New(store Store, opts Options) *Repo {
	if opts.ChunkSize == 0 {
		opts.ChunkSize = DefaultChunkSize
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 4
	}
	if opts.GCGrace <= 0 {
		opts.GCGrace = DefaultGCGrace
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Repo{store: store, opts: opts, log: opts.Logger}
}

// Store is the repository's store.
func (r *Repo) Store() Store { return r.store }

// Progress is how far a write or a restore is, in bytes of the volume:
// the caller computes rate and ETA.
type Progress struct {
	Done, Total int64
}

// ProgressFunc is called as chunks are done (from one goroutine at a
// time, never concurrently); nil is no reporting.
type ProgressFunc func(Progress)

// WriteStats is what a write did.
type WriteStats struct {
	BytesRead      int64 // bytes of the source read (data ranges, or the diff's data)
	BytesWritten   int64 // compressed bytes put into the store
	ChunksTotal    int   // chunks of the volume
	ChunksUploaded int   // chunks put into the store
	ChunksReused   int   // chunks already in the base or in the store
	ZeroChunks     int   // chunks all zeros (holes): recorded, never stored
}

// Range is a byte range of a source.
type Range struct {
	Offset, Length int64
}

// RawSource is a raw image to back up: its bytes (ReadAt), its size, and
// where its data is. DataRanges are sorted and do not overlap; bytes
// outside them read as zeros (holes of a sparse file); nil means all of
// it is data.
type RawSource interface {
	io.ReaderAt
	Size() int64
	DataRanges() ([]Range, error)
}

var _ = context.Background
