package backup

import (
	"context"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo"
)

// progress is how far a transfer of several volumes is, in bytes of the
// volumes: the repository reports each volume's, this adds them up.
type progress struct {
	mu          sync.Mutex
	total, done int64
	finished    int64 // bytes of the volumes done
}

func newProgress(total int64) *progress { return &progress{total: total} }

// volume is the ProgressFunc of the next volume.
func (p *progress) volume() repo.ProgressFunc {
	p.mu.Lock()
	base := p.finished
	p.mu.Unlock()
	return func(pr repo.Progress) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.done = base + pr.Done
	}
}

// volumeDone counts a volume of size bytes as done.
func (p *progress) volumeDone(size int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.finished += size
	p.done = p.finished
}

func (p *progress) get() (done, total int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done, p.total
}

// status is the progress as the API has it.
func (p *progress) status(now time.Time) *apiv1.BackupProgress {
	done, total := p.get()
	return &apiv1.BackupProgress{BytesDone: done, BytesTotal: total, Updated: timestamppb.New(now)}
}

// report calls write with the progress every interval while it changes,
// until the returned func is called: at most one status write per
// interval, whatever the rate of chunks.
func (p *progress) report(ctx context.Context, clk clock.WithTicker, interval time.Duration, write func(context.Context, *apiv1.BackupProgress)) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := clk.NewTicker(interval)
		defer t.Stop()
		var last int64 = -1
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C():
			}
			if done, _ := p.get(); done != last {
				last = done
				write(ctx, p.status(clk.Now()))
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}
