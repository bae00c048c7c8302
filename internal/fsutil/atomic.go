// Package fsutil holds the file-writing helpers several packages need.
//
// Durability follows the rules of POSIX file systems (ext4, xfs): a
// file's data is on disk after fsync of the file, and a name created,
// renamed or removed in a directory after fsync of the directory. A
// rename over a file whose data was not synced may leave, after a power
// cut, the new name on an empty or partial file; a rename whose directory
// was not synced may be lost. So a file is written aside, synced, renamed,
// and its directory synced (Commit).
package fsutil

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// WriteFileAtomic writes data to path through a temporary file in the same
// directory, synced and renamed, so a reader (or a crash) sees the old
// file or the whole new one, never part of it; the directory is synced
// after the rename, so that once WriteFileAtomic returns the new file is
// what survives a power cut.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// Commit makes the finished file tmp (written by another process, such as
// qemu-img) the file path, durably: tmp's data is synced before the
// rename, so that path never names a partial file after a crash, and the
// directory after it, so that the rename survives one. tmp and path must
// be in the same directory. Until Commit returns, a crash leaves either no
// path (tmp is the caller's to remove and redo) or the complete file.
func Commit(tmp, path string) error {
	if filepath.Dir(tmp) != filepath.Dir(path) {
		return fmt.Errorf("committing %s: %s is in another directory", path, tmp)
	}
	if err := syncFile(tmp); err != nil {
		return fmt.Errorf("committing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("committing %s: %w", path, err)
	}
	if err := SyncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("committing %s: %w", path, err)
	}
	return nil
}

// syncFile flushes the data and metadata of the file at path: fsync
// through any descriptor of a file flushes all of it, whoever wrote it.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return f.Close()
}

// SyncDir makes the creation, rename or removal of entries in dir durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return d.Close()
}

// MkdirAll creates dir and its missing parents with mode perm (less the
// umask), as os.MkdirAll does, and syncs the parent of each directory it
// creates, so that the directories, and what is later committed in them,
// survive a power cut. It returns the directories it created, parents
// first, for callers that set their modes.
func MkdirAll(dir string, perm os.FileMode) (created []string, err error) {
	var missing []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err == nil {
			if !fi.IsDir() {
				return nil, &fs.PathError{Op: "mkdir", Path: d, Err: errors.New("not a directory")}
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || d == filepath.Dir(d) {
			return nil, err
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		d := missing[i]
		switch err := os.Mkdir(d, perm); {
		case err == nil:
			created = append(created, d)
		case !errors.Is(err, fs.ErrExist): // else made meanwhile
			return created, err
		}
		if err := SyncDir(filepath.Dir(d)); err != nil {
			return created, err
		}
	}
	return created, nil
}
