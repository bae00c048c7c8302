package console

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/console/consoletest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// logSink collects what a log reader sends.
type logSink struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *logSink) send(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf.Write(b)
	return nil
}

func (s *logSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

func (s *logSink) waitFor(t *testing.T, want string) {
	t.Helper()
	testutil.EventuallyNoError(t, 10*time.Second, fmt.Sprintf("%q sent", want), func() error {
		if got := s.String(); got != want {
			return fmt.Errorf("sent %q", got)
		}
		return nil
	})
}

// livePoller is the live callback of a follower, counting its calls:
// each one starts a poll, so two more calls mean a whole poll ran.
type livePoller struct {
	alive atomic.Bool
	calls atomic.Int64
}

func newLivePoller() *livePoller {
	p := &livePoller{}
	p.alive.Store(true)
	return p
}

func (p *livePoller) live() bool {
	p.calls.Add(1)
	return p.alive.Load()
}

// waitPoll waits until the follower has polled once more, from start to
// end, after the call.
func (p *livePoller) waitPoll(t *testing.T) {
	t.Helper()
	n := p.calls.Load()
	testutil.Eventually(t, 10*time.Second, "a whole poll of the follower", func() bool { return p.calls.Load() >= n+2 })
}

// followInBackground runs fl.follow until the test ends, then waits for
// it to return, so the follower is never closed under a running poll.
func followInBackground(t *testing.T, fl *logFollower, live func() bool) (cancel context.CancelFunc, done <-chan error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ch, ended := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(ended)
		ch <- fl.follow(ctx, clock.RealClock{}, 5*time.Millisecond, live)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ended:
			fl.Close()
		case <-time.After(10 * time.Second):
			t.Error("follow did not end")
		}
	})
	return cancel, ch
}

// rotatedLog lays out a log rotated three times: "a" is the oldest part.
func rotatedLog(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "console.log")
	consoletest.WriteLog(t, path, "aaaa\n")
	consoletest.RotateLog(t, path, 3)
	consoletest.AppendLog(t, path, "bbbb\n")
	consoletest.RotateLog(t, path, 3)
	consoletest.AppendLog(t, path, "cccc\n")
	consoletest.RotateLog(t, path, 3)
	consoletest.AppendLog(t, path, "dd\n")
	// Not ours: a backup that is no rotation number, and another log.
	consoletest.WriteLog(t, path+".bak", "x")
	consoletest.WriteLog(t, path+".01", "x")
	consoletest.WriteLog(t, filepath.Join(filepath.Dir(path), "other.log.0"), "x")
	return path
}

func TestLogFilesOldestFirst(t *testing.T) {
	path := rotatedLog(t)
	consoletest.WriteLog(t, path+".12", "old")
	got, err := logFiles(path)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{path + ".12", path + ".2", path + ".1", path + ".0", path}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("logFiles = %v, want %v", got, want)
	}
	if got, err := logFiles(filepath.Join(t.TempDir(), "gone", "console.log")); err != nil || len(got) != 0 {
		t.Fatalf("logFiles of a missing directory = %v, %v", got, err)
	}
}

func TestSendKeptAllAndTail(t *testing.T) {
	path := rotatedLog(t)
	for _, tc := range []struct {
		tail int64
		want string
	}{
		{0, "aaaa\nbbbb\ncccc\ndd\n"},
		{100, "aaaa\nbbbb\ncccc\ndd\n"},
		{5, "c\ndd\n"}, // across the rotation boundary
		{3, "dd\n"},
		{1, "\n"},
	} {
		var s logSink
		fl, err := sendKept(path, tc.tail, s.send)
		if err != nil {
			t.Fatal(err)
		}
		fl.Close()
		if s.String() != tc.want {
			t.Errorf("tail %d: sent %q, want %q", tc.tail, s.String(), tc.want)
		}
	}
}

func TestSendKeptLargeInChunks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console.log")
	big := strings.Repeat("0123456789abcdef", 3*logChunk/16+7)
	consoletest.WriteLog(t, path, big)
	var chunks int
	var got bytes.Buffer
	fl, err := sendKept(path, 0, func(b []byte) error {
		if len(b) > logChunk {
			t.Errorf("chunk of %d bytes", len(b))
		}
		chunks++
		got.Write(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fl.Close()
	if got.String() != big || chunks < 4 {
		t.Fatalf("sent %d bytes in %d chunks, want %d bytes in at least 4", got.Len(), chunks, len(big))
	}
}

// following picks up where the kept log ended: nothing lost, nothing
// twice, across a rotation and a truncation.
func TestFollowAcrossRotationAndTruncation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console.log")
	consoletest.WriteLog(t, path, "boot\n")
	var s logSink
	fl, err := sendKept(path, 0, s.send)
	if err != nil {
		t.Fatal(err)
	}
	p := newLivePoller()
	_, done := followInBackground(t, fl, p.live)

	consoletest.AppendLog(t, path, "one\n")
	s.waitFor(t, "boot\none\n")
	// Written just before the rotation: still read from the renamed file.
	consoletest.AppendLog(t, path, "two\n")
	consoletest.RotateLog(t, path, 3)
	consoletest.AppendLog(t, path, "three\n")
	s.waitFor(t, "boot\none\ntwo\nthree\n")
	// Truncated in place (not virtlogd's way, but a log may be cut).
	consoletest.WriteLog(t, path, "")
	p.waitPoll(t) // the follower saw the file empty
	consoletest.AppendLog(t, path, "4\n")
	s.waitFor(t, "boot\none\ntwo\nthree\n4\n")

	// The instance ends: what was written before is sent, then follow
	// returns.
	consoletest.AppendLog(t, path, "last\n")
	p.alive.Store(false)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("follow did not end with the instance")
	}
	if got, want := s.String(), "boot\none\ntwo\nthree\n4\nlast\n"; got != want {
		t.Fatalf("sent %q, want %q", got, want)
	}
}

func TestFollowFromEnd(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "console.log")
	consoletest.WriteLog(t, path, "old\n")
	var s logSink
	fl, err := followFromEnd(path, s.send)
	if err != nil {
		t.Fatal(err)
	}
	cancel, done := followInBackground(t, fl, func() bool { return true })
	consoletest.AppendLog(t, path, "new\n")
	s.waitFor(t, "new\n")
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("follow ended with %v, want context.Canceled", err)
	}

	// A log that does not exist yet is all new once it appears.
	later := filepath.Join(dir, "later.log")
	var s2 logSink
	fl2, err := followFromEnd(later, s2.send)
	if err != nil {
		t.Fatal(err)
	}
	p := newLivePoller()
	followInBackground(t, fl2, p.live)
	p.waitPoll(t) // polled while the file was missing
	consoletest.WriteLog(t, later, "first\n")
	s2.waitFor(t, "first\n")
}

// A follower keeps reading the file after cleanup moved it away.
func TestFollowAfterMove(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vmi", "console.log")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	consoletest.WriteLog(t, path, "")
	var s logSink
	fl, err := followFromEnd(path, s.send)
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	consoletest.AppendLog(t, path, "bye\n")
	if err := os.Rename(path, filepath.Join(dir, "kept.log")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Dir(path)); err != nil {
		t.Fatal(err)
	}
	if err := fl.follow(context.Background(), clock.RealClock{}, time.Millisecond, func() bool { return false }); err != nil {
		t.Fatal(err)
	}
	if s.String() != "bye\n" {
		t.Fatalf("sent %q", s.String())
	}
}
