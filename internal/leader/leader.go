// Package leader runs work only while this process holds the etcd election
// (go.etcd.io/etcd/client/v3/concurrency). Losing the session — the lease
// expired because etcd could not be reached — cancels the work at once.
//
// Cancelling is not enough on its own: a process paused past its lease
// (GC, SIGSTOP, a partition) learns it lost only after it resumes, and a
// write it makes in between would land after the next leader's. So the
// work gets the term it was elected for, and writes that must not outlive
// it go through stores bound to it (store.Options.LeaderTerm): etcd refuses
// them once the term's key is gone.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Elector campaigns for leadership under Key.
type Elector struct {
	Client   *clientv3.Client
	Key      string // election prefix, e.g. "/virtplane/leader"
	Identity string // written as the leader value: host name and pid
	// TTL is the session lease, in whole seconds (at least one). The
	// agent refuses a --leader-lease under 5 s; tests go lower to expire
	// a paused leader quickly.
	TTL    time.Duration
	Logger *slog.Logger
	// OnChange, if set, is told when this process gains or loses leadership.
	OnChange func(leading bool)
}

// Run campaigns until ctx ends. Each time it is elected it calls lead with
// the term and a context that is cancelled when leadership is lost, and
// waits for lead to return before campaigning again.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context, term store.LeaderTerm)) error {
	log := e.Logger
	if log == nil {
		log = slog.Default()
	}
	ttl := max(int(e.TTL.Seconds()), 1)
	retry := time.Second
	for ctx.Err() == nil {
		err := e.term(ctx, ttl, lead, log)
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			log.Warn("leader election", "err", err, "retry_in", retry)
		}
		select {
		case <-ctx.Done():
		case <-time.After(retry):
		}
	}
	return nil
}

// term is one session: campaign, lead, resign.
func (e *Elector) term(ctx context.Context, ttl int, lead func(ctx context.Context, term store.LeaderTerm), log *slog.Logger) error {
	sess, err := concurrency.NewSession(e.Client, concurrency.WithTTL(ttl), concurrency.WithContext(ctx))
	if err != nil {
		return fmt.Errorf("creating election session: %w", err)
	}
	defer sess.Close()
	el := concurrency.NewElection(sess, e.Key)

	campaignCtx, cancelCampaign := context.WithCancel(ctx)
	go func() {
		// Stop campaigning when the session dies under us.
		select {
		case <-sess.Done():
		case <-campaignCtx.Done():
		}
		cancelCampaign()
	}()
	err = el.Campaign(campaignCtx, e.Identity)
	cancelCampaign()
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() == nil {
			return errors.New("election session expired while campaigning")
		}
		return fmt.Errorf("campaigning: %w", err)
	}

	leadCtx, cancelLead := context.WithCancel(ctx)
	term := store.LeaderTerm{Key: el.Key(), Revision: el.Rev()}
	log.Info("became leader", "identity", e.Identity, "lease", fmt.Sprintf("%x", sess.Lease()),
		"key", term.Key, "revision", term.Revision)
	e.changed(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(leadCtx, term)
	}()
	select {
	case <-sess.Done():
		log.Warn("lost leadership: election session expired")
	case <-ctx.Done():
	case <-done:
	}
	cancelLead()
	<-done
	e.changed(false)

	// Hand over quickly instead of making the next leader wait for the TTL.
	rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := el.Resign(rctx); err != nil && ctx.Err() == nil {
		log.Debug("resigning", "err", err)
	}
	return nil
}

func (e *Elector) changed(leading bool) {
	if e.OnChange != nil {
		e.OnChange(leading)
	}
}
