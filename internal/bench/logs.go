package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/proc"
)

// LogRecord is one line of an agent's JSON log (--log-format json).
type LogRecord struct {
	Time  time.Time
	Msg   string
	Attrs map[string]any
}

// Str returns attribute k as a string ("" when absent).
func (r LogRecord) Str(k string) string {
	switch v := r.Attrs[k].(type) {
	case string:
		return v
	case nil:
		return ""
	case float64:
		return fmt.Sprintf("%.0f", v)
	default:
		return fmt.Sprint(v)
	}
}

// ReadLog parses the JSON lines of path; other lines (a panic, output of a
// child) are skipped.
func ReadLog(path string) ([]LogRecord, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []LogRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var m map[string]any
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		rec := LogRecord{Attrs: m}
		rec.Msg, _ = m["msg"].(string)
		if ts, ok := m["time"].(string); ok {
			rec.Time, _ = time.Parse(time.RFC3339Nano, ts)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return out, nil
}

// Matching returns the records of path whose message is msg.
func Matching(path, msg string) []LogRecord {
	recs, _ := ReadLog(path)
	var out []LogRecord
	for _, r := range recs {
		if r.Msg == msg {
			out = append(out, r)
		}
	}
	return out
}

// WaitLog polls path until a record with message msg appears and returns
// it; a process that exits first is an error that quotes the log's end.
func WaitLog(ctx context.Context, p *proc.Proc, msg string, timeout time.Duration) (LogRecord, error) {
	var rec LogRecord
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if m := Matching(p.Log, msg); len(m) > 0 {
			rec = m[0]
			return true, nil
		}
		if !p.Alive() {
			return false, fmt.Errorf("%s exited before logging %q:\n%s", p.Name, msg, Tail(p.Log, 2000))
		}
		return false, nil
	})
	if wait.Interrupted(err) {
		return rec, fmt.Errorf("waiting for %q in %s: %w", msg, p.Log, err)
	}
	return rec, err
}

// Tail returns the last n bytes of a file, for error messages.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
