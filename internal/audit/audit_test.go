package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var t0 = time.Date(2026, 12, 8, 10, 0, 0, 0, time.UTC)

func rec(i int) Record {
	return Record{
		Time: t0.Add(time.Duration(i) * time.Second), Identity: "user alice", Role: "edit in a",
		Method: "/virtplane.v1.VirtualMachines/Create", Namespace: "a", Name: fmt.Sprintf("vm-%06d", i),
		UID: "u", Code: "OK", Peer: "127.0.0.1", Server: "s1",
		// A few hundred bytes a line: a MiB is a few thousand records.
		Message: strings.Repeat("m", 200),
	}
}

func newLogger(t *testing.T, cfg Config) *Logger {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func readAll(t *testing.T, l *Logger, q Query) []Record {
	t.Helper()
	var out []Record
	if err := l.Read(context.Background(), q, func(r Record) error { out = append(out, r); return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// eventually polls cond (the removal of old files runs in the
// background) until it holds or the deadline passes.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestFileFormatAndModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "audit")
	path := filepath.Join(dir, "audit.log")
	l := newLogger(t, Config{Path: path})
	r := rec(1)
	r.Time = r.Time.In(time.FixedZone("x", 3600))
	l.Log(r)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := json.Unmarshal(data, &keys); err != nil {
		t.Fatalf("line %q: %v", data, err)
	}
	for _, k := range []string{"time", "identity", "role", "method", "namespace", "name", "uid", "code", "message", "peer", "server"} {
		if _, ok := keys[k]; !ok {
			t.Errorf("key %q missing from %s", k, data)
		}
	}
	if len(keys) != 11 {
		t.Errorf("%d keys, want 11: %s", len(keys), data)
	}
	if keys["time"] != "2026-12-08T10:00:01Z" {
		t.Errorf("time %v, want UTC 2026-12-08T10:00:01Z", keys["time"])
	}
	for p, want := range map[string]os.FileMode{dir: 0o700 | os.ModeDir, path: 0o600} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode() != want {
			t.Errorf("%s: mode %v, want %v", p, st.Mode(), want)
		}
	}
}

func TestExistingFileBecomes0600(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	newLogger(t, Config{Path: path})
	if st, _ := os.Stat(path); st.Mode() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode())
	}
}

func TestMessageCapped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l := newLogger(t, Config{Path: path})
	r := rec(1)
	r.Message = strings.Repeat("é", MaxMessage) // two bytes each
	l.Log(r)
	got := readAll(t, l, Query{})
	if len(got) != 1 || len(got[0].Message) > MaxMessage || !strings.HasSuffix(got[0].Message, "…") {
		t.Fatalf("message of %d bytes: %q", len(got[0].Message), got[0].Message)
	}
	if !json.Valid([]byte(`"` + got[0].Message + `"`)) {
		t.Fatal("cut inside a rune")
	}
}

// Records rotate into at most MaxBackups old files, and Read returns the
// kept ones in order, the current file's last.
func TestRotationKeepsBoundedFilesAndReadsInOrder(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	l := newLogger(t, Config{Path: path, MaxSizeMiB: 1, MaxBackups: 2})
	line, _ := json.Marshal(rec(0))
	perFile := (1 << 20) / (len(line) + 1)
	n := perFile*4 + perFile/2 // four rotations
	for i := range n {
		l.Log(rec(i))
	}
	eventually(t, "old files removed down to 2", func() error {
		old, err := rotatedFiles(path)
		if err != nil {
			return err
		}
		if len(old) != 2 {
			return fmt.Errorf("%d rotated files: %v", len(old), old)
		}
		return nil
	})
	old, _ := rotatedFiles(path)
	for _, p := range append(old, path) {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 1<<20 {
			t.Errorf("%s: %d bytes, over 1 MiB", p, st.Size())
		}
		if st.Mode() != 0o600 {
			t.Errorf("%s: mode %v", p, st.Mode())
		}
	}
	got := readAll(t, l, Query{Limit: MaxReadLimit})
	if len(got) < perFile*2 {
		t.Fatalf("read %d records, want at least the %d of two full files", len(got), perFile*2)
	}
	// The newest last, and no gap: the kept files are the last ones.
	if last := got[len(got)-1].Name; last != rec(n-1).Name {
		t.Fatalf("last record %s, want %s", last, rec(n-1).Name)
	}
	first := n - len(got)
	for i, r := range got {
		if r.Name != rec(first+i).Name {
			t.Fatalf("record %d is %s, want %s", i, r.Name, rec(first+i).Name)
		}
	}
}

func TestConcurrentWriters(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l := newLogger(t, Config{Path: path, MaxSizeMiB: 1, MaxBackups: 50})
	const writers, each = 8, 1000
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				l.Log(rec(w*each + i))
			}
		}()
	}
	// Reads run beside the writers.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 5 {
			_ = l.Read(context.Background(), Query{}, func(Record) error { return nil })
		}
	}()
	wg.Wait()
	<-done
	got := readAll(t, l, Query{Limit: MaxReadLimit})
	seen := map[string]int{}
	for _, r := range got {
		seen[r.Name]++
	}
	if len(got) != writers*each || len(seen) != writers*each {
		t.Fatalf("read %d records, %d distinct, want %d: lines lost or torn", len(got), len(seen), writers*each)
	}
}

func TestReadFiltersAndLimits(t *testing.T) {
	l := newLogger(t, Config{Path: filepath.Join(t.TempDir(), "audit.log")})
	for i := range 30 {
		r := rec(i)
		if i%3 == 0 {
			r.Identity, r.Namespace, r.Method = "user bob", "b", "/virtplane.v1.Consoles/Attach"
		}
		l.Log(r)
	}
	names := func(rs []Record) string {
		var s []string
		for _, r := range rs {
			s = append(s, strings.TrimPrefix(r.Name, "vm-0000"))
		}
		return strings.Join(s, ",")
	}
	for _, c := range []struct {
		q    Query
		want string
	}{
		{Query{Identity: "user bob", Limit: 3}, "21,24,27"},
		{Query{Identity: "user bob", Since: t0.Add(3 * time.Second), Limit: 3}, "03,06,09"},
		{Query{Method: "Consoles", Namespace: "b", Since: t0.Add(25 * time.Second)}, "27"},
		{Query{Namespace: "a", Since: t0.Add(26 * time.Second)}, "26,28,29"},
		{Query{Identity: "user carol"}, ""},
	} {
		if got := names(readAll(t, l, c.q)); got != c.want {
			t.Errorf("%+v: %s, want %s", c.q, got, c.want)
		}
	}
	if len(readAll(t, l, Query{})) != 30 {
		t.Error("the default limit cut 30 records")
	}
	for _, bad := range []int{-1, MaxReadLimit + 1} {
		if err := l.Read(context.Background(), Query{Limit: bad}, func(Record) error { return nil }); err == nil || !strings.Contains(err.Error(), "limit") {
			t.Errorf("limit %d: %v", bad, err)
		}
	}
}

// A line being written (no newline yet) or cut by a crash is no record.
func TestReadSkipsPartialAndForeignLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	l := newLogger(t, Config{Path: path})
	l.Log(rec(1))
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("not json\n" + strings.Repeat("x", 2*maxLine) + "\n")
	_ = f.Close()
	l.Log(rec(2))
	if f, err = os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0); err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString(`{"time":"2026-12-08T10:00:09Z","identity":"half`)
	_ = f.Close()
	got := readAll(t, l, Query{})
	if len(got) != 2 || got[0].Name != rec(1).Name || got[1].Name != rec(2).Name {
		t.Fatalf("got %+v", got)
	}
}

func TestNoFile(t *testing.T) {
	var l *Logger
	l.Log(rec(1)) // nil records nothing
	if err := l.Read(context.Background(), Query{}, nil); err != ErrNoFile {
		t.Fatalf("nil logger: %v", err)
	}
}

// A failed write is counted and logged, and Log returns as ever.
func TestFailedWriteIsCounted(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.log")
	reg := prometheus.NewRegistry()
	l := newLogger(t, Config{Path: path, Registerer: reg})
	// The directory goes away under the log: reopening the file fails.
	l.Log(rec(1))
	l.mu.Lock()
	_ = l.file.Close()
	l.mu.Unlock()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil { // a file where the directory was
		t.Fatal(err)
	}
	l.Log(rec(2))
	if got := testutil.ToFloat64(l.fail.WithLabelValues("file")); got != 1 {
		t.Fatalf("failures counted: %v, want 1", got)
	}
	if n, err := testutil.GatherAndCount(reg, "virtplane_audit_write_failures_total"); err != nil || n != 1 {
		t.Fatalf("registered series: %d, %v", n, err)
	}
}

func TestSyslogToUnixgramSocket(t *testing.T) {
	// A short path: unix socket paths are limited to about 100 bytes.
	dir, err := os.MkdirTemp("", "aud")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "log")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	a, err := ParseSyslogAddress("unixgram://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	// Syslog alone: no file.
	l := newLogger(t, Config{Syslog: &a})
	l.Log(rec(7))
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 4096)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	msg := string(buf[:n])
	// <priority>: authpriv (10) * 8 + info (6) = 86.
	if !strings.HasPrefix(msg, "<86>") || !strings.Contains(msg, syslogTag) {
		t.Errorf("syslog message %q: want priority <86> and tag %s", msg, syslogTag)
	}
	_, body, ok := strings.Cut(msg, "]: ")
	var got Record
	if !ok || json.Unmarshal([]byte(body), &got) != nil || got.Name != rec(7).Name || got.Identity != "user alice" {
		t.Errorf("syslog message %q does not carry the record", msg)
	}
	if err := l.Read(context.Background(), Query{}, nil); err != ErrNoFile {
		t.Errorf("Read without a file: %v", err)
	}
}

// A syslog socket that is not there costs the records, counted, never the
// caller.
func TestSyslogDownIsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := SyslogAddress{Network: "unixgram", Addr: filepath.Join(t.TempDir(), "none")}
	l := newLogger(t, Config{Syslog: &a, Registerer: reg, Path: filepath.Join(t.TempDir(), "a.log")})
	l.Log(rec(1))
	eventually(t, "syslog failure counted", func() error {
		if got := testutil.ToFloat64(l.fail.WithLabelValues("syslog")); got != 1 {
			return fmt.Errorf("syslog failures %v", got)
		}
		return nil
	})
	if got := readAll(t, l, Query{}); len(got) != 1 {
		t.Fatalf("the file lost the record: %d", len(got))
	}
}

func TestParseSyslogAddress(t *testing.T) {
	for in, want := range map[string]SyslogAddress{
		"unixgram:///dev/log":        {"unixgram", "/dev/log"},
		"udp://logs.example.com:514": {"udp", "logs.example.com:514"},
		"tcp://10.0.0.1:6514":        {"tcp", "10.0.0.1:6514"},
		"udp://[fd00::1]:514":        {"udp", "[fd00::1]:514"},
	} {
		got, err := ParseSyslogAddress(in)
		if err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", in, got, err, want)
		}
		if got.String() != in {
			t.Errorf("%s: String() %s", in, got.String())
		}
	}
	for _, in := range []string{
		"", "/dev/log", "unix:///dev/log", "tls://h:514", "http://h:514", "udp://h", "udp://:514", "udp://h:0",
		"udp://h:65536", "udp://h:+5", "udp://h:514/x", "udp://u@h:514", "udp://h:514?x=1", "udp://h:514#f",
		"unixgram://host/dev/log", "unixgram:relative", "unixgram:///dev/../etc/log", "unixgram:///",
		"tcp://h:514 ",
	} {
		if _, err := ParseSyslogAddress(in); err == nil {
			t.Errorf("%q accepted", in)
		} else if !strings.Contains(err.Error(), "syslog address") {
			t.Errorf("%q: error %v does not say what it is about", in, err)
		}
	}
}
