package repo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// dirStore is a Store in a directory: one file per object, at its key.
// Every file operation goes through an os.Root, so nothing outside the
// directory is opened whatever the target holds (a symlink planted on an
// NFS export that points out is refused by the kernel's resolution, not
// by a check here).
type dirStore struct {
	root *os.Root
}

// tmpPrefix starts the names of files being written. ValidateKey refuses
// a segment that starts with ".", so no key is ever one, and List skips
// them.
const tmpPrefix = ".tmp-"

// OpenDir is a Store in the directory root (absolute, existing).
// Objects are files 0600 in directories 0700 (a backup holds a VM's
// disks), and nothing outside root is ever opened (os.Root): a symlink a
// target holds cannot lead out.
func OpenDir(root string) (Store, error) {
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("backup directory %q is not an absolute path", root)
	}
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("backup directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("backup directory %q is not a directory", root)
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("backup directory: %w", err)
	}
	return &dirStore{root: r}, nil
}

func (d *dirStore) Put(ctx context.Context, key string, r io.Reader, size int64) (err error) {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("put %s: negative size %d", key, size)
	}
	dir := path.Dir(key)
	if err := d.root.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp := path.Join(dir, tmpPrefix+hex.EncodeToString(rnd[:]))
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = d.root.Remove(tmp)
		}
	}()
	n, err := io.Copy(f, io.LimitReader(ctxReader{ctx, r}, size+1))
	switch {
	case err != nil:
		return fmt.Errorf("put %s: %w", key, err)
	case n != size:
		return fmt.Errorf("put %s: the reader gave %d bytes, not %d", key, n, size)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := d.root.Rename(tmp, key); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	// The rename is durable only once the directory is synced.
	return d.syncDir(dir)
}

func (d *dirStore) syncDir(dir string) error {
	f, err := d.root.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

func (d *dirStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	f, err := d.root.Open(key)
	if err != nil {
		return nil, d.notFound(key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		_ = f.Close()
		return nil, fmt.Errorf("get %s: not a regular file", key)
	}
	return f, nil
}

func (d *dirStore) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := ValidateKey(key); err != nil {
		return ObjectInfo{}, err
	}
	fi, err := d.root.Stat(key)
	if err != nil {
		return ObjectInfo{}, d.notFound(key, err)
	}
	if !fi.Mode().IsRegular() {
		return ObjectInfo{}, fmt.Errorf("stat %s: not a regular file", key)
	}
	return ObjectInfo{Key: key, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

func (d *dirStore) notFound(key string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w", key, ErrNotFound)
	}
	return fmt.Errorf("%s: %w", key, err)
}

func (d *dirStore) List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error {
	if err := validatePrefix(prefix); err != nil {
		return err
	}
	// Walk the deepest directory the prefix names; keys below it are
	// matched against the rest of the prefix.
	dir := "."
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		dir = prefix[:i]
	}
	fsys := d.root.FS()
	err := fs.WalkDir(fsys, dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if p == dir && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if strings.HasPrefix(e.Name(), ".") && p != "." {
			if e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() || !strings.HasPrefix(p, prefix) || ValidateKey(p) != nil {
			return nil
		}
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted while listed
		}
		if err != nil {
			return err
		}
		return fn(ObjectInfo{Key: p, Size: fi.Size(), ModTime: fi.ModTime()})
	})
	if err != nil {
		return fmt.Errorf("list %q: %w", prefix, err)
	}
	return nil
}

func (d *dirStore) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := d.root.Remove(key); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// ctxReader stops a copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
