package imagepull

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagestore"
)

// pull is one download of one Image.
type pull struct {
	p     *Puller
	img   *apiv1.Image
	uid   string
	began time.Time
	done  chan struct{}
	// suffix ends progress messages (why the last attempt failed).
	suffix string
	// policy is the server's policy as the pull started, and bounds what
	// it holds this pull to.
	policy imagepolicy.Policy
	bounds bounds
	// received counts the bytes this attempt got (not a resumed part).
	received atomic.Int64

	mu       sync.Mutex
	bytes    int64 // received so far, a resumed part included
	total    int64
	rate     float64 // smoothed bytes per second
	lastAt   time.Time
	lastSeen int64
}

func (pl *pull) start(done, total int64) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.bytes, pl.total, pl.lastSeen, pl.lastAt = done, total, done, pl.p.opts.Clock.Now()
}

func (pl *pull) add(n int64) {
	pl.received.Add(n)
	pl.mu.Lock()
	pl.bytes += n
	pl.mu.Unlock()
}

// sample updates the rate from the bytes received since the last sample;
// the average over samples is weighted to the recent ones, so the ETA
// follows a changing link without jumping with every read.
func (pl *pull) sample() {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	now := pl.p.opts.Clock.Now()
	if pl.lastAt.IsZero() {
		pl.lastAt, pl.lastSeen = now, pl.bytes
		return
	}
	dt := now.Sub(pl.lastAt).Seconds()
	if dt <= 0 {
		return
	}
	r := float64(pl.bytes-pl.lastSeen) / dt
	if pl.rate == 0 {
		pl.rate = r
	} else {
		pl.rate = 0.5*pl.rate + 0.5*r
	}
	pl.lastAt, pl.lastSeen = now, pl.bytes
}

func (pl *pull) progress() Progress {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pr := Progress{Done: pl.bytes, Total: pl.total, Rate: int64(pl.rate)}
	if pl.rate > 0 && pl.total > pl.bytes {
		pr.ETA = time.Duration(float64(pl.total-pl.bytes)/pl.rate) * time.Second
	}
	return pr
}

func (pl *pull) pullingStatus(attempt int32, msg string) *apiv1.ImageNodeStatus {
	pr := pl.progress()
	return &apiv1.ImageNodeStatus{
		Phase: validation.ImagePhasePulling, BytesDone: pr.Done, BytesTotal: pr.Total,
		BytesPerSecond: pr.Rate, EtaSeconds: int64(pr.ETA / time.Second), Attempts: attempt,
		Message: msg, ImageUid: pl.uid,
	}
}

// run downloads, verifies and publishes the image, reporting as it goes.
func (pl *pull) run(ctx context.Context) error {
	p := pl.p
	name := pl.img.GetMetadata().GetName()
	spec := pl.img.GetSpec()
	attempt, lastErr := p.nextAttempt(name)
	log := p.log.With("image", name, "uid", pl.uid, "attempt", attempt)
	log.Info("pulling image", "url", validation.RedactURL(spec.GetUrl()))
	// A retry keeps saying why the last attempt failed.
	suffix := ""
	if lastErr != "" {
		suffix = fmt.Sprintf(" (attempt %d; the last failed: %s)", attempt, lastErr)
	}
	pl.suffix = suffix
	p.report(ctx, name, pl.pullingStatus(attempt, "downloading "+validation.RedactURL(spec.GetUrl())+suffix))

	stopReports := pl.reportWhilePulling(ctx, attempt)
	img, err := pl.download(ctx)
	stopReports()
	if err != nil {
		if ctx.Err() != nil {
			log.Info("pull stopped; the download is kept for a resume", "err", err)
			return err
		}
		if permanent(err) {
			err = &PermanentError{Err: err}
		}
		// The whole cause (what a server sent included) stays here; the
		// status says what the node knows (describe).
		log.Warn("pull failed", "err", err, "cause", causeOf(err))
		st := pl.pullingStatus(attempt, err.Error())
		st.Phase = validation.ImagePhaseFailed
		p.report(ctx, name, st)
		return err
	}
	log.Info("image pulled", "sha256", img.SHA256, "format", img.Format, "bytes", img.Size,
		"seconds", p.opts.Clock.Since(pl.began).Round(time.Millisecond).Seconds())
	pr := pl.progress()
	p.report(ctx, name, &apiv1.ImageNodeStatus{
		Phase: validation.ImagePhaseReady, BytesDone: img.Size, BytesTotal: img.Size, BytesPerSecond: pr.Rate,
		Sha256: img.SHA256, Format: img.Format, VirtualSizeBytes: img.VirtualSize, SizeBytes: img.Size,
		ImageUid: pl.uid, Message: "pulled from " + validation.RedactURL(spec.GetUrl()),
	})
	return nil
}

// download fetches and commits the image, then records where it came
// from. The record is written after the image: a crash in between leaves
// an image without a record, which the next Ensure pulls again.
func (pl *pull) download(ctx context.Context) (imagestore.Image, error) {
	p := pl.p
	name := pl.img.GetMetadata().GetName()
	spec := pl.img.GetSpec()
	if img, ok := pl.adopt(ctx); ok {
		return img, nil
	}
	dl, err := p.opts.Store.DownloadPath(name)
	if err != nil {
		return imagestore.Image{}, err
	}
	wctx, stop := pl.watch(imagepolicy.WithPolicy(ctx, pl.policy), pl.received.Load)
	err = p.fetch(wctx, name, pl.uid, spec.GetUrl(), dl, pl, pl.bounds.maxSize)
	stop()
	if err != nil {
		if permanent(err) {
			discard(dl) // nothing half-written, no resume record
		}
		return imagestore.Image{}, err
	}
	img, err := p.opts.Store.Commit(ctx, name, imagestore.ImportOptions{
		ExpectedSHA256: spec.GetSha256(), Format: spec.GetFormat(), Replace: true,
		MaxVirtualSize: pl.bounds.maxVirtualSize,
	})
	os.Remove(resumeInfoPath(dl))
	if errors.Is(err, imagestore.ErrTooLarge) {
		return imagestore.Image{}, fmt.Errorf("refused: %w (the server's --image-max-virtual-size); nothing was kept", err)
	}
	if err != nil {
		return imagestore.Image{}, err
	}
	return img, pl.writeRecord(img.SHA256)
}

// adopt takes an image of the Image's name that is there already with the
// checksum the Image requires (imported by hand on an air-gapped node, or
// pulled before the record was written) instead of downloading it again.
func (pl *pull) adopt(ctx context.Context) (imagestore.Image, bool) {
	want := pl.img.GetSpec().GetSha256()
	if want == "" {
		return imagestore.Image{}, false
	}
	img, err := pl.p.opts.Store.Inspect(ctx, pl.img.GetMetadata().GetName())
	if err != nil || img.SHA256 != want || imagestore.CheckVirtualSize(img.VirtualSize, pl.bounds.maxVirtualSize) != nil {
		return imagestore.Image{}, false
	}
	if err := pl.writeRecord(img.SHA256); err != nil {
		return imagestore.Image{}, false
	}
	pl.p.log.Info("image already here with the Image's checksum; adopted", "image", img.Name)
	return img, true
}

func (pl *pull) writeRecord(sum string) error {
	path, err := pl.p.recordPath(pl.img.GetMetadata().GetName())
	if err != nil {
		return err
	}
	b, _ := json.Marshal(record{ImageUID: pl.uid, URL: pl.img.GetSpec().GetUrl(), SHA256: sum})
	return fsutil.WriteFileAtomic(path, b, 0o600)
}

// reportWhilePulling samples the rate and reports progress every report
// interval until the returned func is called.
func (pl *pull) reportWhilePulling(ctx context.Context, attempt int32) (stop func()) {
	p := pl.p
	name := pl.img.GetMetadata().GetName()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := p.opts.Clock.NewTicker(p.opts.ReportInterval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C():
				pl.sample()
				p.report(ctx, name, pl.pullingStatus(attempt, "downloading: "+pl.progress().String()+pl.suffix))
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}
