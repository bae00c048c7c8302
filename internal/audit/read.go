package audit

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Bounds of Query.Limit.
const (
	DefaultReadLimit = 1000
	MaxReadLimit     = 10000
)

// Query selects records.
type Query struct {
	// Since, when set, selects the records at or after it, and of those
	// the first Limit: a reader continues from the last record it got.
	// Unset, the last Limit records are selected (the newest, as
	// journalctl -n shows them). Either way they come oldest first.
	Since time.Time
	// Limit is at most MaxReadLimit; 0 is DefaultReadLimit.
	Limit int
	// Identity and Namespace must equal the record's when set; Method is
	// a substring of the record's.
	Identity, Method, Namespace string
}

func (q Query) match(r *Record) bool {
	return (q.Since.IsZero() || !r.Time.Before(q.Since)) &&
		(q.Identity == "" || r.Identity == q.Identity) &&
		(q.Namespace == "" || r.Namespace == q.Namespace) &&
		(q.Method == "" || strings.Contains(r.Method, q.Method))
}

// maxLine bounds a line Read takes: records are a few hundred bytes (the
// message is capped); a longer line is not one of them.
const maxLine = 64 << 10

// Read calls emit with the records q selects from the file and the
// rotated files still kept, oldest first. Lines that are not records (a
// line cut by a crash, a line being written) are skipped.
func (l *Logger) Read(ctx context.Context, q Query, emit func(Record) error) error {
	if l == nil || l.path == "" {
		return ErrNoFile
	}
	switch {
	case q.Limit < 0 || q.Limit > MaxReadLimit:
		return fmt.Errorf("limit %d: must be from 0 to %d", q.Limit, MaxReadLimit)
	case q.Limit == 0:
		q.Limit = DefaultReadLimit
	}
	files, err := l.open()
	if err != nil {
		return err
	}
	defer func() {
		for _, f := range files {
			_ = f.Close()
		}
	}()
	// Without Since, the last Limit records: a ring of them.
	var tail []Record
	next, sent := 0, 0
	for _, f := range files {
		err := scan(ctx, f, func(r Record) error {
			if !q.match(&r) {
				return nil
			}
			if !q.Since.IsZero() {
				if err := emit(r); err != nil {
					return err
				}
				if sent++; sent == q.Limit {
					return errEnough
				}
				return nil
			}
			if len(tail) < q.Limit {
				tail = append(tail, r)
			} else {
				tail[next] = r
			}
			next = (next + 1) % q.Limit
			return nil
		})
		if errors.Is(err, errEnough) {
			return nil
		}
		if err != nil {
			return err
		}
	}
	if len(tail) == q.Limit {
		tail = append(tail[next:], tail[:next]...)
	}
	for _, r := range tail {
		if err := emit(r); err != nil {
			return err
		}
	}
	return nil
}

var errEnough = errors.New("enough records")

// boundedFile is an open log file, read up to its size when opened: the
// current file grows while it is read, and what comes later is for the
// next Read.
type boundedFile struct {
	*os.File
	size int64
}

// open opens the rotated files, oldest first, then the current one, under
// the write lock: a rotation renames the current file, and an open file
// is read whatever it is called or whether it is removed later.
func (l *Logger) open() ([]boundedFile, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	names, err := rotatedFiles(l.path)
	if err != nil {
		return nil, err
	}
	names = append(names, l.path)
	var files []boundedFile
	for _, n := range names {
		f, err := os.Open(n)
		if errors.Is(err, fs.ErrNotExist) {
			// Removed as too old since it was listed, or not made yet.
			continue
		}
		if err == nil {
			var st os.FileInfo
			if st, err = f.Stat(); err == nil {
				files = append(files, boundedFile{File: f, size: st.Size()})
				continue
			}
			_ = f.Close()
		}
		for _, f := range files {
			_ = f.Close()
		}
		return nil, fmt.Errorf("audit log: %w", err)
	}
	return files, nil
}

// rotatedFiles lists the files rotated out of path, oldest first.
// lumberjack names them <name>-<UTC time of the rotation><ext>, with
// the time in a fixed-width layout, so the names sort by age.
func rotatedFiles(path string) ([]string, error) {
	dir, base := filepath.Split(path)
	ext := filepath.Ext(base)
	prefix := strings.TrimSuffix(base, ext) + "-"
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("audit log directory: %w", err)
	}
	var out []string
	for _, e := range entries {
		n := e.Name()
		ts, ok := strings.CutPrefix(n, prefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		ts, ok = strings.CutSuffix(ts, ext)
		if !ok {
			continue
		}
		if _, err := time.Parse(rotatedTimeLayout, ts); err != nil {
			continue
		}
		out = append(out, filepath.Join(dir, n))
	}
	slices.Sort(out)
	return out, nil
}

// rotatedTimeLayout is lumberjack's (backupTimeFormat).
const rotatedTimeLayout = "2006-01-02T15-04-05.000"

// scan calls fn with each record of f up to its size.
func scan(ctx context.Context, f boundedFile, fn func(Record) error) error {
	br := bufio.NewReaderSize(io.LimitReader(f.File, f.size), maxLine)
	for n := 0; ; n++ {
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// Not a record: skip to the end of the line.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			if err == nil {
				continue
			}
		}
		if err == io.EOF {
			// A last line without its newline is being written (or was
			// cut): not a record yet.
			return nil
		}
		if err != nil {
			return fmt.Errorf("audit log %s: %w", f.Name(), err)
		}
		var r Record
		if json.Unmarshal(bytes.TrimSpace(line), &r) != nil {
			continue
		}
		if err := fn(r); err != nil {
			return err
		}
	}
}
