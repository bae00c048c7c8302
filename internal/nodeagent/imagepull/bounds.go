package imagepull

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagestore"
)

// What one pull may cost. The bytes it downloads stop at the Image's
// max_size (as imagepolicy.Policy.MaxSizeFor reads it: at most the
// server's cap); the whole download stops at the policy's deadline; a
// download slower than the policy's minimum speed over its window stops
// (curl's --speed-limit and --speed-time); and the image store keeps no
// image whose virtual size is above the policy's cap. The first, second
// and fourth are permanent for the Image on this node (PermanentError):
// what is downloaded is removed, resume record included, and no attempt
// follows while the bounds stay the same. A slow download is not: it
// keeps what it has for a resume and is retried with the backoff, as an
// interrupted one is.

// bounds are the limits a pull of one Image ran under; a permanent
// failure holds while they stay the same.
type bounds struct {
	maxSize, maxVirtualSize int64
	timeout                 time.Duration
}

func boundsOf(p imagepolicy.Policy, spec *apiv1.ImageSpec) bounds {
	return bounds{maxSize: p.MaxSizeFor(spec), maxVirtualSize: p.MaxVirtualSize, timeout: p.Timeout}
}

// boundError is a pull stopped by one of its bounds; its message is the
// node's own words.
type boundError struct {
	msg       string
	permanent bool
}

func (e *boundError) Error() string { return e.msg }

func tooLarge(maxSize int64, how string) error {
	return &boundError{permanent: true, msg: fmt.Sprintf("refused: %s more than max_size %s (spec.max_size, at most the server's --image-max-size-cap); nothing was kept",
		how, imagepolicy.Bytes(maxSize))}
}

// permanent says whether err is, or wraps, a pull's permanent failure
// (a PermanentError wraps one).
func permanent(err error) bool {
	var be *boundError
	return (errors.As(err, &be) && be.permanent) || errors.Is(err, imagestore.ErrTooLarge)
}

// watchInterval is how often a pull's deadline and speed are looked at,
// on the puller's clock.
const watchInterval = time.Second

// speedSample is how many bytes had arrived at a time.
type speedSample struct {
	at    time.Time
	bytes int64
}

// watch returns ctx ending (with a *boundError as its cause) when the
// pull outlasts the policy's timeout or gets fewer than its minimum
// bytes per second over its window; stop ends the watch. received is the
// bytes this attempt got so far.
func (pl *pull) watch(ctx context.Context, received func() int64) (context.Context, func()) {
	pol, clk := pl.policy, pl.p.opts.Clock
	ctx, cancel := context.WithCancelCause(ctx)
	start := clk.Now()
	t := clk.NewTicker(watchInterval)
	done := make(chan struct{})
	stopped := make(chan struct{})
	samples := []speedSample{{start, received()}}
	go func() {
		defer close(stopped)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case now := <-t.C():
				if err := checkProgress(pol, start, now, received(), &samples); err != nil {
					cancel(err)
					return
				}
			}
		}
	}()
	return ctx, func() { close(done); <-stopped; cancel(nil) }
}

// checkProgress adds a sample and judges the pull at now: past the
// deadline, or fewer than MinSpeed × MinSpeedTime bytes in the last
// MinSpeedTime (once it has run that long). samples keeps the last one at
// least a window old and those after it.
func checkProgress(pol imagepolicy.Policy, start, now time.Time, bytes int64, samples *[]speedSample) error {
	if now.Sub(start) >= pol.Timeout {
		return &boundError{permanent: true, msg: fmt.Sprintf("refused: the download took longer than %s (the server's --image-pull-timeout); nothing was kept", pol.Timeout)}
	}
	s := append(*samples, speedSample{now, bytes})
	base := -1
	for i, x := range s {
		if now.Sub(x.at) >= pol.MinSpeedTime {
			base = i
		}
	}
	if base > 0 {
		s = s[base:]
		base = 0
	}
	*samples = s
	if base < 0 {
		return nil // not a whole window yet
	}
	window := now.Sub(s[0].at)
	if got, want := bytes-s[0].bytes, int64(float64(pol.MinSpeed)*window.Seconds()); got < want {
		return &boundError{msg: fmt.Sprintf("stopped: the download got %d bytes in the last %s, less than %s a second (the server's --image-pull-min-speed and --image-pull-min-speed-time); what arrived is kept for a resume",
			got, window.Round(time.Second), imagepolicy.Bytes(pol.MinSpeed))}
	}
	return nil
}
