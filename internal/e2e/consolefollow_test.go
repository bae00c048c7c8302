package e2e

import (
	"bytes"
	"fmt"
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
	mu   sync.Mutex
	buf  bytes.Buffer
	stop chan struct{}
	done chan struct{}
}

func followConsole(t *testing.T, path string) *console {
	c := &console{t: t, path: path, stop: make(chan struct{}), done: make(chan struct{})}
	go c.follow()
	return c
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
			f, _ = os.Open(c.path)
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
