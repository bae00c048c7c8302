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
	p.began = p.clk.Now()
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

// line is one report: "12.5Mi of 64Mi (19%) at 3.2Mi/s, ETA 16s".
func (p *byteProgress) line(elapsed time.Duration, final bool) string {
	n := p.done.Load()
	rate := 0.0
	if s := elapsed.Seconds(); s > 0 {
		rate = float64(n) / s
	}
	s := formatBytes(n)
	if p.total > 0 {
		s += fmt.Sprintf(" of %s (%d%%)", formatBytes(p.total), n*100/p.total)
	}
	s += fmt.Sprintf(" at %s/s", formatBytes(int64(rate)))
	switch {
	case final:
		s += fmt.Sprintf(" in %s", elapsed.Round(100*time.Millisecond))
	case p.total > 0 && rate > 0:
		s += fmt.Sprintf(", ETA %s", time.Duration(float64(p.total-n)/rate*float64(time.Second)).Round(time.Second))
	}
	if p.tty {
		if final {
			return "\r\033[K" + s + "\n"
		}
		return "\r\033[K" + s
	}
	return s + "\n"
}
