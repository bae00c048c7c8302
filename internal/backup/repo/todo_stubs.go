package repo

// API surface committed first so that the backup controllers can build on
// it; the bodies come in the next commits.

import (
	"context"
	"errors"
	"io"
	"time"
)

var errTODO = errors.New("repo: not implemented yet")

// OpenDir is a Store in the directory root (absolute, existing).
// Objects are files 0600 in directories 0700, and nothing outside root
// is ever opened (os.Root): a symlink a target holds cannot lead out.
func OpenDir(root string) (Store, error) { return nil, errTODO }

// S3Config is how to reach an S3 bucket.
type S3Config struct {
	// Endpoint is the server's URL: https://host[:port] or http://...
	Endpoint string
	// Bucket (must exist) and Prefix (a key prefix ending in "/", or ""):
	// the repository is the objects under Prefix.
	Bucket string
	Prefix string
	// Region (optional: "" lets the client ask the server).
	Region string
	// AccessKey and SecretKey authenticate; they are never logged.
	AccessKey string
	SecretKey string
	// CACertPEM are the CAs to trust for an https endpoint, instead of
	// the system's (optional).
	CACertPEM []byte
}

// OpenS3 is a Store in an S3 bucket (github.com/minio/minio-go/v7). It
// checks that the bucket exists and that the keys may read it.
func OpenS3(ctx context.Context, cfg S3Config) (Store, error) { return nil, errTODO }

// WriteRaw backs up a raw image: every chunk of src is read, hashed and,
// unless it is zeros (a hole or all-zero bytes: recorded as "", never
// stored) or already stored (in base at any index, or found in the
// store), compressed and put. The Volume it returns has SizeBytes,
// ChunkSize and Chunks; the caller sets Name, StorageClass, ClassKind
// and Parent.
func (r *Repo) WriteRaw(ctx context.Context, src RawSource, base *Volume, p ProgressFunc) (*Volume, WriteStats, error) {
	return nil, WriteStats{}, errTODO
}

// WriteRBDDiff backs up an rbd image from the stdout of `rbd export-diff
// [--from-snap S] --whole-object pool/img@snap -` (format v1). Chunks
// the diff does not name keep base's hash (base is the backup of S; nil
// with a full export-diff); a write that does not cover whole chunks is
// merged onto base's chunk (fetched and verified), so the result is
// always whole chunks. Progress counts the image's bytes passed.
func (r *Repo) WriteRBDDiff(ctx context.Context, diff io.Reader, base *Volume, p ProgressFunc) (*Volume, WriteStats, error) {
	return nil, WriteStats{}, errTODO
}

// RestoreRaw writes every non-zero chunk of v to dst, which the caller
// made a sparse file of v.SizeBytes (zeros need no writing), verifying
// each chunk before a byte of it is written: a missing, truncated or
// altered chunk is ErrCorrupt naming the chunk's key and the volume.
// On an error dst holds part of the volume: the caller deletes it.
func (r *Repo) RestoreRaw(ctx context.Context, v *Volume, dst io.WriterAt, p ProgressFunc) error {
	return errTODO
}

// RestoreRBDDiff writes v as an export-diff v1 stream, for `rbd
// import-diff - pool/img` onto a new, empty image: the size record and
// the non-zero chunks, each verified before it is written. On an error
// the stream ends without its end record, so import-diff fails; the
// caller deletes the image.
func (r *Repo) RestoreRBDDiff(ctx context.Context, v *Volume, w io.Writer, p ProgressFunc) error {
	return errTODO
}

// PutManifest validates m and stores it. A manifest is written once: an
// id that is already in the repository is an error.
func (r *Repo) PutManifest(ctx context.Context, m *Manifest) error { return errTODO }

// GetManifest reads backup id, verifies its checksum (a truncated or
// altered manifest is ErrCorrupt) and validates it; a missing one is
// ErrNotFound.
func (r *Repo) GetManifest(ctx context.Context, id string) (*Manifest, error) { return nil, errTODO }

// ListManifests is every backup in the repository, newest first. A
// manifest that cannot be read or is corrupt is an error: a listing that
// left it out would let retention and GC act on a wrong picture.
func (r *Repo) ListManifests(ctx context.Context) ([]ManifestInfo, error) { return nil, errTODO }

// DeleteManifest deletes backup id (its chunks stay until GC); a missing
// one is not an error.
func (r *Repo) DeleteManifest(ctx context.Context, id string) error { return errTODO }

// GCStats is what GC did.
type GCStats struct {
	Manifests        int   // manifests read
	ChunksReferenced int   // distinct chunks they name
	ChunksDeleted    int   // unreferenced chunks deleted
	BytesDeleted     int64 // their stored size
	ChunksKept       int   // unreferenced chunks younger than the grace
}

// GC deletes the chunks that no manifest names and that are older than
// grace (0: Options.GCGrace). A manifest that cannot be read stops it
// before anything is deleted.
func (r *Repo) GC(ctx context.Context, grace time.Duration) (GCStats, error) {
	return GCStats{}, errTODO
}

// Verify reads every chunk backup id names and checks it: every one
// present and intact, or an error naming each that is not (ErrCorrupt).
func (r *Repo) Verify(ctx context.Context, id string) error { return errTODO }

// Retention is how many backups to keep: the KeepLast newest, and the
// newest of each of the KeepDaily most recent days and the KeepWeekly
// most recent weeks that have backups.
type Retention struct {
	KeepLast, KeepDaily, KeepWeekly int
}

// SelectRetention splits backups into those p keeps and those it drops.
func SelectRetention(backups []ManifestInfo, p Retention, now time.Time) (keep, drop []ManifestInfo) {
	return backups, nil
}

// RawFile is a raw image file as a RawSource: its holes are found with
// SEEK_DATA/SEEK_HOLE.
type RawFile struct{}

// OpenRawFile opens a raw image file for WriteRaw.
func OpenRawFile(path string) (*RawFile, error) { return nil, errTODO }

func (f *RawFile) ReadAt(p []byte, off int64) (int, error) { return 0, errTODO }
func (f *RawFile) Size() int64                             { return 0 }
func (f *RawFile) DataRanges() ([]Range, error)            { return nil, errTODO }
func (f *RawFile) Close() error                            { return nil }

var _ RawSource = (*RawFile)(nil)
