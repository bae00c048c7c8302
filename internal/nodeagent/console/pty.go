package console

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
	"github.com/virtplane/terraform-provider-virtplane/internal/termraw"
)

// serialWriteTimeout bounds one write of client input: a guest that does
// not read its serial port drops input rather than stall the session.
const serialWriteTimeout = 5 * time.Second

// serialPort is the node's end of a domain's serial pty, for client input.
// Output is read from the console log, not from here: the pty is drained
// and the bytes dropped, so that QEMU never blocks on a full pty buffer.
type serialPort struct {
	f   *os.File
	log *slog.Logger
	mu  sync.Mutex
}

// openSerial opens the serial pty of rec's running domain.
func (s *Server) openSerial(ctx context.Context, rec *state.VMI) (*serialPort, error) {
	pty, err := s.opts.Instances.SerialPty(ctx, rec)
	if err != nil {
		return nil, err
	}
	// An adopted domain's launcher reads the pty itself, into the
	// console log (docs/adopt.md): a second reader would take half of it.
	return openSerialPty(pty, s.log.With("pty", pty), rec.AdoptedUUID == "")
}

// openSerialPty opens the pty at path and, with drain, starts draining it.
func openSerialPty(path string, log *slog.Logger, drain bool) (*serialPort, error) {
	// QEMU made it raw; OpenPty again, and opens nothing but a pty (the
	// path is the launcher's word, and the agent runs as root).
	f, err := termraw.OpenPty(path, os.O_RDWR)
	if err != nil {
		return nil, fmt.Errorf("the launcher's serial pty: %w", err)
	}
	p := &serialPort{f: f, log: log}
	if drain {
		go func() { _, _ = io.Copy(io.Discard, f) }() // ends with Close
	}
	return p, nil
}

// write passes client input to the guest.
func (p *serialPort) write(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	_ = p.f.SetWriteDeadline(time.Now().Add(serialWriteTimeout))
	if _, err := p.f.Write(b); err != nil {
		p.log.Warn("console input dropped", "bytes", len(b), "err", err)
	}
}

// Close closes the pty, which also ends the drain.
func (p *serialPort) Close() error { return p.f.Close() }
