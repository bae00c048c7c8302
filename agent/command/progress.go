package command

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// byteProgress prints a transfer's bytes, rate and ETA: redrawn in place
// every second on a terminal, a line every plainInterval elsewhere, and
// a last line at the end.
type byteProgress struct {
	w     io.Writer
	tty   bool
	total int64 // -1: unknown
	clk   clock.WithTicker
	done  atomic.Int64
	began time.Time
	// base is what was done before start (a resumed upload's offset):
	// not sent in this run, so not in the rate.
	base int64
}

func newByteProgress(w io.Writer, tty bool, total int64, clk clock.WithTicker) *byteProgress {
	return &byteProgress{w: w, tty: tty, total: total, clk: clk}
}

// Write counts bytes that went through.
func (p *byteProgress) Write(b []byte) (int, error) {
	p.done.Add(int64(len(b)))
	return len(b), nil
}

// start prints until the returned func is called, which prints the
// final line.
func (p *byteProgress) start() (stop func()) {
	p.began, p.base = p.clk.Now(), p.done.Load()
	every := plainInterval
	if p.tty {
		every = time.Second
	}
	t := p.clk.NewTicker(every)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-quit:
				return
			case <-t.C():
				p.print(false)
			}
		}
	})
	var once sync.Once
	return func() {
		once.Do(func() {
			t.Stop()
			close(quit)
			wg.Wait()
			p.print(true)
		})
	}
}

func (p *byteProgress) print(final bool) {
	fmt.Fprint(p.w, p.line(p.clk.Now().Sub(p.began), final))
}

// line is one report: "12.5Mi of 64Mi (19%) at 3.2Mi/s, ETA 16s", the
// last one "64Mi of 64Mi (100%) at 3.2Mi/s in 20s".
func (p *byteProgress) line(elapsed time.Duration, final bool) string {
	n := p.done.Load()
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(n-p.base) / s
	}
	s := transferText(n, p.total, rate, !final)
	if final {
		s += fmt.Sprintf(" in %s", elapsed.Round(100*time.Millisecond))
	}
	if p.tty {
		if final {
			return "\r\033[K" + s + "\n"
		}
		return "\r\033[K" + s
	}
	return s + "\n"
}

// transferText is the one wording of how far a transfer of bytes is, for
// every command that shows one (export download, image upload, backup
// and backup restore --wait): "12.5Mi of 64Mi (19%) at 3.2Mi/s, ETA 16s".
// A total <= 0 is not known, and a rate <= 0 not yet (both are left out,
// and the ETA with them); eta false leaves the ETA out (a transfer that
// ended).
func transferText(done, total int64, rate float64, eta bool) string {
	s := formatBytes(done)
	if total > 0 {
		s += fmt.Sprintf(" of %s (%d%%)", formatBytes(total), done*100/total)
	}
	if rate <= 0 {
		return s
	}
	s += fmt.Sprintf(" at %s/s", formatBytes(int64(rate)))
	if eta && total > done {
		s += fmt.Sprintf(", ETA %s", time.Duration(float64(total-done)/rate*float64(time.Second)).Round(time.Second))
	}
	return s
}
