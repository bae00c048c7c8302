package etcdserver

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"

	"k8s.io/utils/clock"
)

// RaftLeadershipCheckInterval is how often the controllers' leader checks
// whether its own member leads etcd.
const RaftLeadershipCheckInterval = 2 * time.Second

// KeepRaftLeadershipAway hands etcd's raft leadership to another member
// whenever this one holds it, checking every RaftLeadershipCheckInterval
// until ctx ends. The controllers' leader runs it: were its host also
// etcd's leader, losing that one host would cost two elections in a row —
// etcd's first, whose new leader renews every lease for a full TTL plus
// an election timeout, and only then the controllers' — about 3 s longer
// than the election lease alone.
func (s *Server) KeepRaftLeadershipAway(ctx context.Context, clk clock.WithTicker, log *slog.Logger) {
	t := clk.NewTicker(RaftLeadershipCheckInterval)
	defer t.Stop()
	for {
		moved, err := s.moveRaftLeadershipAway(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.Debug("could not hand etcd's raft leadership on", "err", err)
		case moved:
			log.Info("handed etcd's raft leadership to another member, so that losing this host costs one election",
				"leader", s.etcd.Server.Leader().String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// moveRaftLeadershipAway hands raft leadership on when this member leads
// and has another voter; moved is false when there was nothing to do.
// It picks the transferee itself, among the voters that answer on their
// peer URL right now: etcd's own choice (the peer connected longest)
// still counts a member that died a moment ago as connected until a
// stream to it breaks, and a transfer to a dead member drops every
// proposal for an election timeout and then gives up.
func (s *Server) moveRaftLeadershipAway(ctx context.Context) (moved bool, err error) {
	srv := s.etcd.Server
	if srv.Leader() != srv.MemberID() {
		return false, nil
	}
	var others []*membership.Member
	for _, m := range srv.Cluster().Members() {
		if !m.IsLearner && m.ID != srv.MemberID() {
			others = append(others, m)
		}
	}
	if len(others) == 0 {
		return false, nil
	}
	slices.SortFunc(others, func(a, b *membership.Member) int { return cmp.Compare(a.ID, b.ID) })
	tlsCfg, err := s.etcd.Config().PeerTLSInfo.ClientConfig()
	if err != nil {
		return false, fmt.Errorf("peer TLS: %w", err)
	}
	tr := &http.Transport{TLSClientConfig: tlsCfg}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: peerProbeTimeout}
	for _, m := range others {
		if !answers(ctx, hc, m.PeerURLs) {
			continue
		}
		mctx, cancel := context.WithTimeout(ctx, srv.Cfg.ReqTimeout())
		err := srv.MoveLeader(mctx, uint64(srv.MemberID()), uint64(m.ID))
		cancel()
		if err != nil {
			return false, fmt.Errorf("moving raft leadership to %s: %w", m.Name, err)
		}
		return srv.Leader() != srv.MemberID(), nil
	}
	return false, errors.New("no other voter answers on its peer URL")
}

// peerProbeTimeout bounds one liveness probe of a member's peer URL; peers
// of one cluster are a LAN apart.
const peerProbeTimeout = 500 * time.Millisecond

// answers reports whether a member serves its version on one of its peer
// URLs.
func answers(ctx context.Context, hc *http.Client, urls []string) bool {
	for _, u := range urls {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(u, "/")+"/version", nil)
		if err != nil {
			continue
		}
		resp, err := hc.Do(req)
		if err != nil {
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return true
		}
	}
	return false
}
