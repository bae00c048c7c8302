package ceph

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// streamOSDTimeout bounds each OSD operation of a streamed export or
// import: a stream has no overall bound (a large image takes as long as
// it takes), so an OSD that stops answering must fail it.
const streamOSDTimeout = 120 * time.Second

// streamCmd is a Ceph CLI whose data goes through stdin or stdout, in
// the connection's namespace, with the connection's arguments first. It
// always execs (Runner is for calls whose output is small).
func (c *Conn) streamCmd(ctx context.Context, name string, args ...string) *exec.Cmd {
	args = append(c.common(), append([]string{"--rados-osd-op-timeout", strconv.Itoa(int(streamOSDTimeout / time.Second))}, args...)...)
	if c.NetNS != "" {
		args = append([]string{"--net=" + c.NetNS, "--", name}, args...)
		name = "nsenter"
	}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// ExportDiff starts `rbd export-diff --whole-object [--from-snap from]
// pool/image@snap -` (export-diff format v1, whole objects: the records
// cover whole RBD objects, which a backup of chunks the object size
// takes without reading anything back) and returns its output. Read it
// to its end, then Close: Close waits for rbd and returns its error (a
// *CLIError, classified), killing it first when the stream was left
// unread (Close reads what little may be left after the end record a
// diff reader stops at). from "" is a full export.
func (c *Conn) ExportDiff(ctx context.Context, image, from, snap string) (io.ReadCloser, error) {
	if snap == "" {
		return nil, errors.New("ceph: export-diff needs the snapshot to export")
	}
	args := []string{"export-diff", "--no-progress", "--whole-object"}
	if from != "" {
		args = append(args, "--from-snap", from)
	}
	ctx, cancel := context.WithCancel(ctx)
	cmd := c.streamCmd(ctx, "rbd", append(args, c.snapSpec(image, snap), "-")...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, fmt.Errorf("rbd export-diff: %w", err)
	}
	return &exportStream{r: out, cmd: cmd, cancel: cancel, stderr: &stderr, what: c.snapSpec(image, snap)}, nil
}

type exportStream struct {
	r      io.ReadCloser
	cmd    *exec.Cmd
	cancel context.CancelFunc
	stderr *bytes.Buffer
	what   string
	eof    bool
	once   sync.Once
	err    error
}

func (s *exportStream) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err == io.EOF {
		s.eof = true
	}
	return n, err
}

// drainBytes is how much of an export Close reads when its reader
// stopped before EOF: a reader of the diff format stops at the end
// record, before rbd has closed its output; a stream with more than this
// left was given up.
const drainBytes = 1 << 20

func (s *exportStream) Close() error {
	s.once.Do(func() {
		if !s.eof {
			// rbd ends on its own once its output is read (or, blocked on
			// an OSD, after its op timeout, or when ctx ends).
			if _, err := io.CopyN(io.Discard, s.r, drainBytes); err == io.EOF {
				s.eof = true
			}
		}
		if !s.eof {
			s.cancel() // the reader gave up: rbd would block on a full pipe
		}
		err := s.cmd.Wait()
		s.cancel()
		if err != nil {
			if !s.eof {
				s.err = fmt.Errorf("rbd export-diff %s: stopped before its end", s.what)
				return
			}
			s.err = fmt.Errorf("rbd export-diff %s: %w", s.what, classify(&CLIError{Name: "rbd", Stderr: s.stderr.String(), Err: err}))
		}
	})
	return s.err
}

// ImportDiff runs `rbd import-diff - pool/image` with r, an export-diff
// v1 stream, as its input: it applies the stream onto image (which must
// exist; its size becomes the stream's). A stream that ends without its
// end record, or that r fails, fails the import.
func (c *Conn) ImportDiff(ctx context.Context, image string, r io.Reader) error {
	cmd := c.streamCmd(ctx, "rbd", "import-diff", "--no-progress", "-", c.spec(image))
	var stderr bytes.Buffer
	cmd.Stdin, cmd.Stderr = r, &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return fmt.Errorf("rbd import-diff into %s: %w", c.spec(image), classify(&CLIError{Name: "rbd", Stderr: stderr.String(), Err: err}))
		}
		return fmt.Errorf("rbd import-diff into %s: %w", c.spec(image), err)
	}
	return nil
}

// Export runs `rbd export pool/image[@snap] dst` (a raw file): what the
// backup benchmark and tests compare restores with.
func (c *Conn) Export(ctx context.Context, image, snap, dst string) error {
	spec := c.spec(image)
	if snap != "" {
		spec = c.snapSpec(image, snap)
	}
	cmd := c.streamCmd(ctx, "rbd", "export", "--no-progress", spec, dst)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("rbd export %s: %w", spec, classify(&CLIError{Name: "rbd", Stderr: stderr.String(), Err: err}))
	}
	return nil
}
