package etcdserver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/etcdutl/v3/snapshot"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ErrInvalidSnapshot is wrapped by the errors of snapshot files that are
// truncated, corrupt or not etcd snapshots at all.
var ErrInvalidSnapshot = errors.New("invalid snapshot")

// RestoreRevisionBump is added to etcd's revision by RestoreSnapshot, and
// every older revision is marked compacted. Clients (node agents, watches,
// caches) may hold resource versions from after the snapshot; without the
// bump a watch resumed from such a revision would silently wait for the
// restored store to catch up and skip everything in between, and new
// writes would reuse resource versions already handed out. With it they
// get "compacted" and re-list. Objects keep their resource versions.
const RestoreRevisionBump = 1_000_000_000

// SnapshotInfo describes a verified snapshot file.
type SnapshotInfo struct {
	// Revision is the etcd revision the snapshot was taken at; its objects
	// have resource versions up to it.
	Revision int64
	// TotalKeys counts the live keys (API objects, leases' keys, leader
	// election keys, ...).
	TotalKeys int
	// Size of the file in bytes, including the sha256 trailer.
	Size int64
	// Hash is etcd's CRC-32C of the snapshot's contents, the one
	// `etcdutl snapshot status` prints; equal hashes mean equal contents.
	Hash uint32
	// StorageVersion is the etcd storage version that wrote the snapshot,
	// e.g. "3.6.0"; empty for etcd < 3.6.
	StorageVersion string
	// EtcdVersion is the version of the server that sent the snapshot; only
	// SaveSnapshot knows it.
	EtcdVersion string
}

// SaveSnapshot streams a point-in-time snapshot of the member client is
// connected to into path. The data goes to a temporary file next to path,
// is fsynced and verified (checksum, then etcd's own status check) and only
// then renamed over path, so path is either the old file or a complete,
// valid snapshot; nothing is left behind on failure. With several
// endpoints the client picks one member; the snapshot is that member's
// state.
func SaveSnapshot(ctx context.Context, client *clientv3.Client, path string) (info SnapshotInfo, err error) {
	if path == "" {
		return info, errors.New("etcd snapshot: no file given")
	}
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	// Same directory, so the rename is atomic; hidden, so a half-written
	// file does not look like a backup.
	f, err := os.CreateTemp(dir, "."+base+".part-*")
	if err != nil {
		return info, fmt.Errorf("etcd snapshot: %w", err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close() // may be closed already; then this is a no-op error
			os.Remove(tmp)
		}
	}()

	resp, err := client.SnapshotWithVersion(ctx)
	if err != nil {
		return info, fmt.Errorf("etcd snapshot: %w", err)
	}
	defer resp.Snapshot.Close()
	if _, err := io.Copy(f, resp.Snapshot); err != nil {
		// The stream reports a cancelled ctx as a bare gRPC status.
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return info, fmt.Errorf("etcd snapshot: receiving: %w", err)
	}
	if err := f.Sync(); err != nil {
		return info, fmt.Errorf("etcd snapshot: %w", err)
	}
	if err := f.Close(); err != nil {
		return info, fmt.Errorf("etcd snapshot: %w", err)
	}
	info, err = SnapshotStatus(tmp)
	if err != nil {
		return info, fmt.Errorf("etcd snapshot: the received snapshot does not verify: %w", err)
	}
	info.EtcdVersion = resp.Version
	if err := os.Rename(tmp, path); err != nil {
		return info, fmt.Errorf("etcd snapshot: %w", err)
	}
	// The rename itself must survive a crash, or the backup may vanish.
	if err := syncDir(dir); err != nil {
		return info, fmt.Errorf("etcd snapshot: %w", err)
	}
	return info, nil
}

// SnapshotStatus verifies a snapshot file and describes it. It checks the
// sha256 trailer etcd appends to every snapshot before letting bbolt read
// the file, so a damaged file fails cleanly, and then runs etcdutl's status
// check (bbolt integrity, hash, revision and keys).
func SnapshotStatus(path string) (SnapshotInfo, error) {
	var info SnapshotInfo
	size, err := verifyChecksum(path)
	if err != nil {
		return info, err
	}
	var st snapshot.Status
	err = noPanic(func() (err error) {
		st, err = snapshot.NewV3(zapLogger(nil)).Status(path)
		return err
	})
	if err != nil {
		return info, fmt.Errorf("snapshot %s: %w: %w", path, ErrInvalidSnapshot, err)
	}
	return SnapshotInfo{
		Revision:       st.Revision,
		TotalKeys:      st.TotalKey,
		Size:           size,
		Hash:           st.Hash,
		StorageVersion: st.Version,
	}, nil
}

// verifyChecksum checks the sha256 of the bbolt data against the trailer
// etcd appends to it, and returns the file size.
func verifyChecksum(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("snapshot: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("snapshot: %w", err)
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("snapshot %s: not a regular file: %w", path, ErrInvalidSnapshot)
	}
	size := fi.Size()
	// bbolt files are whole pages (multiples of 512); etcd appends the
	// 32-byte digest, which is how etcdutl recognizes it too.
	if size < 512+sha256.Size || size%512 != sha256.Size {
		return 0, fmt.Errorf("snapshot %s: %w: %d bytes is not a bbolt database with a sha256 trailer (truncated, or not made by snapshot save)",
			path, ErrInvalidSnapshot, size)
	}
	h := sha256.New()
	if _, err := io.CopyN(h, f, size-sha256.Size); err != nil {
		return 0, fmt.Errorf("snapshot %s: %w", path, err)
	}
	want := make([]byte, sha256.Size)
	if _, err := io.ReadFull(f, want); err != nil {
		return 0, fmt.Errorf("snapshot %s: %w", path, err)
	}
	if !bytes.Equal(h.Sum(nil), want) {
		return 0, fmt.Errorf("snapshot %s: %w: sha256 mismatch, the file is corrupt", path, ErrInvalidSnapshot)
	}
	return size, nil
}

// RestoreSnapshot creates the embedded etcd's data in <dataDir>/etcd (see
// DirName) from a snapshot, for the member Start(cfg) runs: same member
// name, peer URL and cluster token, so the member and cluster IDs match.
// cfg.DataDir may be empty or <dataDir>/etcd; Name and Logger are used.
//
// It refuses when <dataDir>/etcd exists: that is live data, and the caller
// must stop the agent and move it aside. The snapshot is verified first,
// the data is built in a temporary directory inside dataDir and renamed
// into place, so on failure nothing is left behind (dataDir itself is
// removed again if RestoreSnapshot created it). etcd's revision continues
// at the snapshot's plus RestoreRevisionBump.
//
// ctx is checked between steps; the restore itself is not interruptible.
func RestoreSnapshot(ctx context.Context, snapshotPath, dataDir string, cfg Config) (err error) {
	if dataDir == "" {
		return errors.New("etcd restore: data dir is required")
	}
	dataDir, err = filepath.Abs(dataDir)
	if err != nil {
		return fmt.Errorf("etcd restore: data dir: %w", err)
	}
	target := filepath.Join(dataDir, DirName)
	if cfg.DataDir != "" {
		d, err := filepath.Abs(cfg.DataDir)
		if err != nil {
			return fmt.Errorf("etcd restore: %w", err)
		}
		if d != target {
			return fmt.Errorf("etcd restore: Config.DataDir %s is not %s, the directory the restore creates", d, target)
		}
	}
	if sock := filepath.Join(target, SocketName); len(sock) > maxSocketPath {
		return fmt.Errorf("etcd restore: socket path %s is longer than %d bytes, the server could not start; use a shorter data dir", sock, maxSocketPath)
	}
	if err := refuseExisting(target); err != nil {
		return err
	}
	// Before creating anything: a bad file must leave no trace.
	if _, err := SnapshotStatus(snapshotPath); err != nil {
		return fmt.Errorf("etcd restore: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("etcd restore: %w", err)
	}

	undo, err := mkdirAll(dataDir)
	if err != nil {
		return fmt.Errorf("etcd restore: %w", err)
	}
	defer func() {
		if err != nil {
			undo()
		}
	}()
	// Hidden and inside dataDir: same file system for the rename, and the
	// agent never mistakes it for its data.
	tmp, err := os.MkdirTemp(dataDir, "."+DirName+".restore-*")
	if err != nil {
		return fmt.Errorf("etcd restore: %w", err)
	}
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
	}()

	name := cfg.memberName()
	// etcdutl refuses a non-empty output dir only, so the empty tmp is fine.
	err = noPanic(func() error {
		return snapshot.NewV3(zapLogger(cfg.Logger)).Restore(snapshot.RestoreConfig{
			SnapshotPath:        snapshotPath,
			Name:                name,
			OutputDataDir:       tmp,
			PeerURLs:            []string{PeerURL},
			InitialCluster:      name + "=" + PeerURL,
			InitialClusterToken: ClusterToken(name),
			RevisionBump:        RestoreRevisionBump,
			MarkCompacted:       true,
		})
	})
	if err != nil {
		return fmt.Errorf("etcd restore: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("etcd restore: %w", err)
	}
	// etcdutl does not fsync everything it writes (the snap file, the
	// directories); the rename must not publish data still in the cache.
	if err := syncTree(tmp); err != nil {
		return fmt.Errorf("etcd restore: %w", err)
	}
	// Rename fails rather than replace if the target appeared meanwhile
	// with data in it (an agent started during the restore).
	if err := os.Rename(tmp, target); err != nil {
		return fmt.Errorf("etcd restore: %w", err)
	}
	if err := syncDir(dataDir); err != nil {
		return fmt.Errorf("etcd restore: %w", err)
	}
	return nil
}

// noPanic runs fn, turning a panic into an error: etcdutl assumes an etcd
// database and panics on a valid bbolt file without etcd's buckets, and
// an operator's wrong file must not crash the command (or skip cleanup).
func noPanic(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("not an etcd database: %v", r)
		}
	}()
	return fn()
}

// refuseExisting fails if dir exists, saying how to move it aside.
func refuseExisting(dir string) error {
	_, err := os.Lstat(dir)
	switch {
	case err == nil:
		return fmt.Errorf("etcd restore: %s: %w; stop the agent and move it aside first, e.g. mv %s %s.old",
			dir, fs.ErrExist, dir, dir)
	case errors.Is(err, fs.ErrNotExist):
		return nil
	default:
		return fmt.Errorf("etcd restore: %w", err)
	}
}

// mkdirAll is os.MkdirAll(dir, 0o700) that also returns how to remove
// again what it created (empty directories only, innermost first).
func mkdirAll(dir string) (undo func(), err error) {
	var created []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return func() {
		for _, d := range created {
			os.Remove(d)
		}
	}, nil
}

// syncTree fsyncs every file and directory under root, children first.
func syncTree(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		return syncFile(p)
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syncDir(dirs[i]); err != nil {
			return err
		}
	}
	return nil
}

func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// zapLogger hands etcdutl's warnings to lg (slog.Default() when nil); its
// info chatter about every restore step is dropped.
func zapLogger(lg *slog.Logger) *zap.Logger {
	if lg == nil {
		lg = slog.Default()
	}
	// etcdutl's Fatal would exit the process, skipping the cleanup; as a
	// panic, noPanic turns it into an error.
	return zap.New(newSlogCore(lg.With("component", "etcd-snapshot").Handler(), zap.WarnLevel, new(atomic.Bool)),
		zap.WithFatalHook(zapcore.WriteThenPanic))
}
