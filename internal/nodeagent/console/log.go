package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// virtlogd rotates a console log when it reaches max_size (virtlogd.conf,
// default 2 MiB) by renaming: console.log becomes console.log.0, .0
// becomes .1, and so on up to max_backups-1 (default 3), the oldest
// (libvirt's virRotatingFileWriterRollover). The writer then starts a new
// console.log.

const (
	// logChunk is the most guest output one message carries.
	logChunk = 32 << 10
	// logPoll is how often a followed log is checked for new output.
	logPoll = 100 * time.Millisecond
)

// logFiles returns the files of the console log at path that exist,
// oldest first: the rotated ones by falling number, then path itself.
func logFiles(path string) ([]string, error) {
	dir, base := filepath.Split(path)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing console logs: %w", err)
	}
	type rotated struct {
		n    int
		name string
	}
	var (
		old  []rotated
		live bool
	)
	for _, e := range ents {
		name := e.Name()
		if name == base {
			live = true
			continue
		}
		suffix, ok := strings.CutPrefix(name, base+".")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(suffix); err == nil && n >= 0 && strconv.Itoa(n) == suffix {
			old = append(old, rotated{n, name})
		}
	}
	sort.Slice(old, func(i, j int) bool { return old[i].n > old[j].n })
	out := make([]string, 0, len(old)+1)
	for _, r := range old {
		out = append(out, filepath.Join(dir, r.name))
	}
	if live {
		out = append(out, path)
	}
	return out, nil
}

// sendKept sends the kept console log at path, rotated files first, at
// most tail bytes from its end when tail > 0. It returns a follower
// positioned where the sending ended, so following loses and repeats
// nothing.
func sendKept(path string, tail int64, send func([]byte) error) (*logFollower, error) {
	names, err := logFiles(path)
	if err != nil {
		return nil, err
	}
	type part struct {
		f    *os.File
		size int64
	}
	var parts []part
	defer func() {
		for _, p := range parts {
			if p.f != nil {
				p.f.Close()
			}
		}
	}()
	// All opened, then measured: what is sent is one consistent cut even
	// if virtlogd rotates meanwhile.
	var total int64
	for _, name := range names {
		f, err := os.Open(name)
		if errors.Is(err, os.ErrNotExist) {
			continue // rotated away since it was listed
		}
		if err != nil {
			return nil, fmt.Errorf("opening console log: %w", err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("opening console log: %w", err)
		}
		parts = append(parts, part{f, fi.Size()})
		total += fi.Size()
	}
	skip := int64(0)
	if tail > 0 && total > tail {
		skip = total - tail
	}
	fl := &logFollower{path: path, send: send}
	for i, p := range parts {
		start := min(skip, p.size)
		skip -= start
		if _, err := p.f.Seek(start, io.SeekStart); err != nil {
			return nil, fmt.Errorf("reading console log: %w", err)
		}
		if err := copyChunks(io.LimitReader(p.f, p.size-start), send); err != nil {
			return nil, err
		}
		if i == len(parts)-1 && p.f.Name() == path {
			// The live file: following goes on from here.
			fi, err := p.f.Stat()
			if err != nil {
				return nil, fmt.Errorf("reading console log: %w", err)
			}
			fl.f, fl.fi, fl.off = p.f, fi, p.size
			parts[i].f = nil
		}
	}
	return fl, nil
}

// followFromEnd returns a follower of the log at path that sends only what
// is appended from now on.
func followFromEnd(path string, send func([]byte) error) (*logFollower, error) {
	fl := &logFollower{path: path, send: send}
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return fl, nil // all of it is new once it appears
	}
	if err != nil {
		return nil, fmt.Errorf("opening console log: %w", err)
	}
	fi, err := f.Stat()
	if err == nil {
		_, err = f.Seek(fi.Size(), io.SeekStart)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("opening console log: %w", err)
	}
	fl.f, fl.fi, fl.off = f, fi, fi.Size()
	return fl, nil
}

// logFollower sends what virtlogd appends to a console log. It keeps the
// file open, so it also reads what was written just before the file was
// rotated, moved or removed.
type logFollower struct {
	path string
	send func([]byte) error
	f    *os.File    // nil until the file exists
	fi   os.FileInfo // of f when opened, to spot a rotation
	off  int64       // read offset in f
}

// Close releases the file.
func (l *logFollower) Close() {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// follow sends new output every interval of clk until ctx ends or live
// reports the instance gone; what was written before that is sent first.
func (l *logFollower) follow(ctx context.Context, clk clock.WithTicker, interval time.Duration, live func() bool) error {
	t := clk.NewTicker(interval)
	defer t.Stop()
	for {
		ended := !live()
		if err := l.poll(); err != nil {
			return err
		}
		if ended {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C():
		}
	}
}

// poll sends what was appended since the last poll, across a rotation
// (the renamed file is read to its end, then the new one from its start)
// or a truncation (read again from the start).
func (l *logFollower) poll() error {
	if l.f == nil {
		if !l.open() {
			return nil
		}
	}
	cur, err := os.Stat(l.path)
	rotated := err == nil && !os.SameFile(cur, l.fi)
	if fi, err := l.f.Stat(); err == nil && fi.Size() < l.off {
		if _, err := l.f.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("rereading truncated console log: %w", err)
		}
		l.off = 0
	}
	if err := l.drain(); err != nil {
		return err
	}
	if !rotated {
		return nil
	}
	// Nothing more is written to the renamed file once the new one
	// exists: it was read to its end above.
	l.Close()
	if l.open() {
		return l.drain()
	}
	return nil
}

// open opens the live file to read it from its start; false if it does
// not exist (yet, or any more).
func (l *logFollower) open() bool {
	f, err := os.Open(l.path)
	if err != nil {
		return false
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return false
	}
	l.f, l.fi, l.off = f, fi, 0
	return true
}

func (l *logFollower) drain() error {
	n, err := copyCounted(l.f, l.send)
	l.off += n
	return err
}

// copyChunks sends r in chunks of at most logChunk bytes.
func copyChunks(r io.Reader, send func([]byte) error) error {
	_, err := copyCounted(r, send)
	return err
}

func copyCounted(r io.Reader, send func([]byte) error) (int64, error) {
	var total int64
	buf := make([]byte, logChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			total += int64(n)
			// send may keep the slice; the buffer is reused.
			if serr := send(append([]byte(nil), buf[:n]...)); serr != nil {
				return total, serr
			}
		}
		if errors.Is(err, io.EOF) {
			return total, nil
		}
		if err != nil {
			return total, fmt.Errorf("reading console log: %w", err)
		}
	}
}
