package ceph

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"time"
)

// The streaming commands of backups (docs/backups.md): an image's
// changes read as an export-diff stream, and such a stream written onto
// an image. They run as long as the data takes, bounded by ctx alone
// (each Ceph connection still by ConnectTimeout), and pass the data
// through pipes: nothing is staged on the node's disk.

// ExportDiff writes `rbd export-diff --whole-object [--from-snap from]
// pool/image@snap -` to w: the whole image at snap, or with from what
// changed since that earlier snapshot of the same image.
func (c *Conn) ExportDiff(ctx context.Context, image, snap, from string, w io.Writer) error {
	args := []string{"export-diff", "--no-progress", "--whole-object"}
	if from != "" {
		args = append(args, "--from-snap", from)
	}
	args = append(args, c.snapSpec(image, snap), "-")
	return c.stream(ctx, nil, w, args...)
}

// ImportDiff applies the export-diff stream r onto pool/image, which
// must exist (of the stream's size or smaller: the size record resizes
// it). A stream that ends early fails the import.
func (c *Conn) ImportDiff(ctx context.Context, image string, r io.Reader) error {
	return c.stream(ctx, r, nil, "import-diff", "--no-progress", "-", c.spec(image))
}

// stream runs rbd with the connection's arguments, stdin from in and
// stdout to out (either may be nil), in the connection's namespace.
func (c *Conn) stream(ctx context.Context, in io.Reader, out io.Writer, args ...string) error {
	name, full := "rbd", append(c.common(), args...)
	if c.NetNS != "" {
		full = append([]string{"--net=" + c.NetNS, "--", name}, full...)
		name = "nsenter"
	}
	cmd := exec.CommandContext(ctx, name, full...)
	cmd.Stdin, cmd.Stdout = in, out
	var stderr bytes.Buffer
	cmd.Stderr = &limitedBuffer{b: &stderr, max: 64 << 10}
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return fmt.Errorf("rbd %s: %w (%s)", args[0], ctx.Err(), lastLines(stderr.String(), 3))
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		// Not the CLI's failure: a broken pipe to out, or in failing.
		return fmt.Errorf("rbd %s: %w", args[0], err)
	}
	return classify(&CLIError{Name: "rbd", Stderr: stderr.String(), Err: err})
}

// limitedBuffer keeps the last max bytes written to it (about): a CLI's
// stderr says why it failed in its last lines, and a chatty one must not
// grow the agent's memory.
type limitedBuffer struct {
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if len(p) > l.max {
		l.b.Reset()
		l.b.Write(p[len(p)-l.max:])
		return len(p), nil
	}
	if over := l.b.Len() + len(p) - l.max; over > 0 {
		l.b.Next(over)
	}
	l.b.Write(p)
	return len(p), nil
}
