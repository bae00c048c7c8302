package imagestore

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// tempMarker is in the name of every temporary file the store makes
// (".NAME.tmp-123"); with the leading dot it keeps them out of List, and
// Open removes old ones that a crash left behind.
const tempMarker = ".tmp-"

// staleTempAge: older temporary files belong to no running import. An
// import rewrites its file continuously while copying, and verifying
// takes minutes at most.
const staleTempAge = 6 * time.Hour

// copyBlock is the copy's unit. All-zero blocks are skipped rather than
// written, so sparse raw images stay sparse.
const copyBlock = 1 << 20

// removeStaleTemps deletes temporary files older than before. Best
// effort: a store that cannot be cleaned still works.
func (s *Store) removeStaleTemps(before time.Time) {
	filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasPrefix(d.Name(), ".") || !strings.Contains(d.Name(), tempMarker) {
			return nil
		}
		if fi, err := d.Info(); err == nil && fi.ModTime().Before(before) {
			os.Remove(path)
		}
		return nil
	})
}

// copySparse copies src to dst (a new, empty file) until EOF, leaving
// holes where src has whole blocks of zeros, and returns the byte count.
// It stops when ctx is done.
func copySparse(ctx context.Context, dst *os.File, src io.Reader) (int64, error) {
	buf := make([]byte, copyBlock)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		m, err := io.ReadFull(src, buf)
		if m > 0 {
			block := buf[:m]
			if isZero(block) {
				if _, serr := dst.Seek(int64(m), io.SeekCurrent); serr != nil {
					return n, serr
				}
			} else if _, werr := dst.Write(block); werr != nil {
				return n, werr
			}
			n += int64(m)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return n, err
		}
	}
	// A trailing hole needs the length set explicitly.
	return n, dst.Truncate(n)
}

func isZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// renameNoReplace moves tmp to path unless path exists, atomically, so
// two imports of one name cannot both win. renameat2(RENAME_NOREPLACE)
// does it in one step; filesystems without it (NFS, some FUSE) get
// link+unlink, equally atomic for the name.
func renameNoReplace(tmp, path string) error {
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, path, unix.RENAME_NOREPLACE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		if err = os.Link(tmp, path); err == nil {
			return os.Remove(tmp)
		}
	}
	if errors.Is(err, unix.EEXIST) {
		return fs.ErrExist
	}
	if err != nil {
		return &os.LinkError{Op: "rename", Old: tmp, New: path, Err: err}
	}
	return nil
}

// hashFile returns the hex SHA-256 of the file at path.
func hashFile(ctx context.Context, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return hashReader(ctx, f)
}
