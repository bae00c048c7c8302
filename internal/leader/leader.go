// Package leader runs work only while this process holds the etcd election
// (go.etcd.io/etcd/client/v3/concurrency). Losing the session — the lease
// expired because etcd could not be reached — cancels the work at once, so
// two servers never run controllers together for longer than the lease TTL.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Elector campaigns for leadership under Key.
type Elector struct {
	Client   *clientv3.Client
	Key      string        // election prefix, e.g. "/virtplane/leader"
	Identity string        // written as the leader value: host name and pid
	TTL      time.Duration // session lease; at least 5 s
	Logger   *slog.Logger
	// OnChange, if set, is told when this process gains or loses leadership.
	OnChange func(leading bool)
}

// Run campaigns until ctx ends. Each time it is elected it calls lead with
// a context that is cancelled when leadership is lost, and waits for lead
// to return before campaigning again.
func (e *Elector) Run(ctx context.Context, lead func(ctx context.Context)) error {
	log := e.Logger
	if log == nil {
		log = slog.Default()
	}
	ttl := int(e.TTL.Seconds())
	if ttl < 5 {
		ttl = 5
	}
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
func (e *Elector) term(ctx context.Context, ttl int, lead func(ctx context.Context), log *slog.Logger) error {
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
	log.Info("became leader", "identity", e.Identity, "lease", fmt.Sprintf("%x", sess.Lease()))
	e.changed(true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		lead(leadCtx)
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
