package e2e

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// --- console -----------------------------------------------------------------

// console reads a guest's serial console log as virtlogd appends to it.
// It keeps the file open, so it still reads everything after the node
// agent removed the VMI's directory (which it does as soon as the VMI
// ends).
type console struct {
	t    *testing.T
	path string
	// after, when set, is the file (and its size) that was at path when
	// the console was asked for: if the console opens that same file,
	// it starts reading at that size; a file made anew since (the node
	// agent removes an instance's directory when the instance leaves)
	// is read from its start.
	after os.FileInfo
	mu    sync.Mutex
	buf   bytes.Buffer
	// from is the offset the console started reading at, and file the
	// file it reads, once opened.
	from int64
	file os.FileInfo
	// limit, once >= 0, ends the console's segment of the file (see
	// segment); -1 while it has none.
	limit int
	stop  chan struct{}
	done  chan struct{}
}

func followConsole(t *testing.T, path string) *console {
	return followConsoleAfter(t, path, nil)
}

// followConsoleAfter follows path from the end of the file after, when
// path is still that file, else from its start: a guest that comes back
// to a node appends to the console log it left there if that log is
// still there.
func followConsoleAfter(t *testing.T, path string, after os.FileInfo) *console {
	c := &console{t: t, path: path, after: after, limit: -1, stop: make(chan struct{}), done: make(chan struct{})}
	go c.follow()
	return c
}

// fileNow is the file at path now, nil when there is none.
func fileNow(t *testing.T, path string) os.FileInfo {
	t.Helper()
	fi, err := os.Stat(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// endAt ends c's segment where a later console of the same file starts:
// at the size of after, when c reads that file.
func (c *console) endAt(after os.FileInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if after != nil && c.file != nil && os.SameFile(c.file, after) {
		c.limit = int(after.Size() - c.from)
	}
}

// segment is what c read of its own stretch of the file: up to where
// the next console of the same file began, else all of it.
func (c *console) segment() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.buf.Bytes()
	if c.limit >= 0 && c.limit < len(b) {
		b = b[:c.limit]
	}
	return string(b)
}

func (c *console) close() {
	select {
	case <-c.stop:
	default:
		close(c.stop)
	}
	<-c.done
}

func (c *console) follow() {
	defer close(c.done)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	chunk := make([]byte, 64*1024)
	for {
		if f == nil {
			f = c.open()
		}
		for f != nil {
			n, err := f.Read(chunk)
			if n > 0 {
				c.mu.Lock()
				c.buf.Write(chunk[:n])
				c.mu.Unlock()
			}
			if err != nil || n == 0 {
				break
			}
		}
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
	}
}

// start is the offset c started reading at.
func (c *console) start() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.from
}

// open opens c's file and seeks to where c starts reading; nil when it
// does not exist yet.
func (c *console) open() *os.File {
	f, err := os.Open(c.path)
	if err != nil {
		return nil
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil
	}
	from := int64(0)
	if c.after != nil && os.SameFile(fi, c.after) {
		from = c.after.Size()
	}
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		f.Close()
		return nil
	}
	c.mu.Lock()
	c.from, c.file = from, fi
	c.mu.Unlock()
	return f
}

func (c *console) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// waitMarker waits until the console shows marker and returns what
// follows it.
func (c *console) waitMarker(marker string, d time.Duration) string {
	c.t.Helper()
	var rest string
	testutil.EventuallyNoError(c.t, d, marker+" on the console "+c.path, func() error {
		var ok bool
		if rest, ok = testguest.FindMarker(c.text(), marker); !ok {
			return fmt.Errorf("console:\n%s", c.text())
		}
		return nil
	})
	return rest
}
