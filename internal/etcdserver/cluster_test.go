package etcdserver

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// freePeerURL is a loopback peer URL on a port nobody listens on now:
// peers must know each other's URLs before any of them starts.
func freePeerURL(t *testing.T) string {
	t.Helper()
	return "https://127.0.0.1:" + strconv.Itoa(testutil.FreePort(t, "tcp"))
}

// member is one embedded member of a test cluster.
type member struct {
	name, dir, url string
	tls            PeerTLS
}

// peerTLS makes the etcd CA below dir and a peer certificate for
// loopback, as the agent does.
func peerTLS(t *testing.T, dir string) PeerTLS {
	t.Helper()
	p := pki.EtcdPathsIn(dir)
	if err := pki.EnsureEtcdPeer(p, []string{"127.0.0.1"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	return PeerTLS{CertFile: p.PeerCert, KeyFile: p.PeerKey, CAFile: p.CACert, AllowedCN: pki.EtcdPeerName}
}

func newMembers(t *testing.T, n int) []*member {
	t.Helper()
	tls := peerTLS(t, t.TempDir())
	var ms []*member
	for i := range n {
		ms = append(ms, &member{name: fmt.Sprintf("m%d", i), dir: t.TempDir(), url: freePeerURL(t), tls: tls})
	}
	return ms
}

func initialCluster(ms []*member) string {
	var parts []string
	for _, m := range ms {
		parts = append(parts, m.name+"="+m.url)
	}
	return strings.Join(parts, ",")
}

func (m *member) start(ctx context.Context, t *testing.T, initial string, join bool) (*Server, error) {
	return Start(ctx, Config{
		DataDir: m.dir, Name: m.name, Logger: testLogger(t),
		Peer: &Peer{URLs: []string{m.url}, InitialCluster: initial, Join: join, TLS: m.tls},
	})
}

// startAll starts the members at once: each is ready only once a
// majority of them is up.
func startAll(t *testing.T, ms []*member) []*Server {
	t.Helper()
	servers := make([]*Server, len(ms))
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Go(func() { servers[i], errs[i] = m.start(t.Context(), t, initialCluster(ms), false) })
	}
	wg.Wait()
	for i, s := range servers {
		if s != nil {
			t.Cleanup(func() { s.Close() })
		}
		if errs[i] != nil {
			t.Fatalf("member %s: %v", ms[i].name, errs[i])
		}
	}
	return servers
}

// putWithLeader writes as the API does: failing at once, with
// ErrNoLeader, when the member knows no leader.
func putWithLeader(ctx context.Context, s *Server, key string) error {
	ctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), 10*time.Second)
	defer cancel()
	_, err := s.Client().Put(ctx, key, "v")
	return err
}

// Three embedded members over peer TLS form one store; it keeps taking
// writes with one member gone, refuses them with "no leader" with two
// gone, and takes them again once a second member is back.
func TestThreeMemberCluster(t *testing.T) {
	t.Parallel()
	ms := newMembers(t, 3)
	s := startAll(t, ms)

	if err := putWithLeader(t.Context(), s[0], "/a"); err != nil {
		t.Fatal(err)
	}
	if resp, err := s[2].Client().Get(t.Context(), "/a"); err != nil || resp.Count != 1 {
		t.Fatalf("a write on m0 read on m2: %v %v", resp, err)
	}
	members, err := ListMembers(t.Context(), s[1].Client())
	if err != nil || len(members) != 3 {
		t.Fatalf("members %+v %v", members, err)
	}

	s[0].Close()
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return putWithLeader(ctx, s[1], "/b") == nil, nil
	}); err != nil {
		t.Fatalf("two of three members took no write: %v", putWithLeader(t.Context(), s[1], "/b"))
	}

	s[1].Close()
	var lastErr error
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		lastErr = putWithLeader(ctx, s[2], "/c")
		return errors.Is(lastErr, rpctypes.ErrNoLeader), nil
	}); err != nil {
		t.Fatalf("one of three members: the write ended with %v, want %v", lastErr, rpctypes.ErrNoLeader)
	}

	back, err := ms[1].start(t.Context(), t, initialCluster(ms), false)
	if err != nil {
		t.Fatalf("restarting m1: %v", err)
	}
	t.Cleanup(func() { back.Close() })
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return putWithLeader(ctx, s[2], "/c") == nil, nil
	}); err != nil {
		t.Fatalf("quorum back, the write still fails: %v", putWithLeader(t.Context(), s[2], "/c"))
	}
	if resp, err := back.Client().Get(t.Context(), "/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil || resp.Count != 3 {
		t.Fatalf("m1 after its restart: %v keys, %v; want /a /b /c", resp.Count, err)
	}
}

// A member that ran alone grows into a cluster: restarted with a peer
// URL it announces it, a member added with AddMember joins as a learner
// and promotes itself, and RemoveMember takes it out again.
func TestGrowFromOneMemberAndShrink(t *testing.T) {
	t.Parallel()
	ms := newMembers(t, 2)
	alone, err := Start(t.Context(), Config{DataDir: ms[0].dir, Name: ms[0].name, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alone.Client().Put(t.Context(), "/before", "v"); err != nil {
		t.Fatal(err)
	}
	if _, err := AddMember(t.Context(), alone.Client(), "m1", []string{ms[1].url}); err == nil || !strings.Contains(err.Error(), "--etcd-peer-listen") {
		t.Fatalf("adding to a member without a peer listener: %v", err)
	}
	alone.Close()

	first, err := ms[0].start(t.Context(), t, "", false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { first.Close() })
	initial, err := AddMember(t.Context(), first.Client(), "m1", []string{ms[1].url})
	if err != nil {
		t.Fatal(err)
	}
	if want := initialCluster(ms); initial != want {
		t.Fatalf("initial cluster %q, want %q", initial, want)
	}
	if _, err := AddMember(t.Context(), first.Client(), "m2", []string{freePeerURL(t)}); err == nil || !strings.Contains(err.Error(), "never started") {
		t.Fatalf("a second member while the first added one never started: %v", err)
	}

	second, err := ms[1].start(t.Context(), t, initial, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Close() })
	members, err := ListMembers(t.Context(), second.Client())
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 2 || members[0].Learner || members[1].Learner || members[1].Name != "m1" {
		t.Fatalf("members after the join: %+v", members)
	}
	if resp, err := second.Client().Get(t.Context(), "/before"); err != nil || resp.Count != 1 {
		t.Fatalf("the joined member reads %v, %v", resp, err)
	}

	if _, err := RemoveMember(t.Context(), first.Client(), "nope"); err == nil || !strings.Contains(err.Error(), "m0, m1") {
		t.Fatalf("removing an unknown member: %v", err)
	}
	// Right after the join: etcd refuses the removal until the members
	// have been connected for its health interval (5 s), which
	// RemoveMember waits out.
	if _, err := RemoveMember(t.Context(), first.Client(), "m1"); err != nil {
		t.Fatalf("removing m1: %v", err)
	}
	members, err = ListMembers(t.Context(), first.Client())
	if err != nil || len(members) != 1 || members[0].Name != "m0" {
		t.Fatalf("after removing m1: %+v %v", members, err)
	}
	if err := putWithLeader(t.Context(), first, "/after"); err != nil {
		t.Fatalf("m0 alone again: %v", err)
	}
}

func TestPeerConfigErrors(t *testing.T) {
	tls := PeerTLS{CertFile: "c", KeyFile: "k", CAFile: "ca"}
	for _, tc := range []struct {
		peer Peer
		want string
	}{
		{Peer{URLs: []string{"http://127.0.0.1:2380"}, TLS: tls}, "mutual TLS only"},
		{Peer{URLs: []string{"https://0.0.0.0:2380"}, TLS: tls}, "cannot dial"},
		{Peer{URLs: []string{"https://127.0.0.1"}, TLS: tls}, "want https://host:port"},
		{Peer{URLs: []string{"https://127.0.0.1:2380"}, InitialCluster: "a=https://127.0.0.2:2380", TLS: tls}, `does not name this member "m"`},
		{Peer{URLs: []string{"https://127.0.0.1:2380"}, InitialCluster: "m=https://127.0.0.2:2380", TLS: tls}, "but it listens on https://127.0.0.1:2380"},
		{Peer{URLs: []string{"https://127.0.0.1:2380"}, InitialCluster: "m https://127.0.0.1:2380", TLS: tls}, "want name=https://host:port"},
		{Peer{URLs: []string{"https://127.0.0.1:2380"}, InitialCluster: "M=https://127.0.0.1:2380", TLS: tls}, "lower-case"},
		{Peer{URLs: []string{"https://127.0.0.1:2380"}}, "needs a certificate"},
	} {
		_, err := Start(t.Context(), Config{DataDir: filepath.Join(t.TempDir(), "d"), Name: "m", Peer: &tc.peer})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.peer, err, tc.want)
		}
	}
}

// A member of a cluster waits for a majority as long as it takes (the
// first server started after a full outage), becomes ready once a second
// member starts, and a start given up (SIGTERM) returns at once rather
// than wait for the peers.
func TestMemberWaitsForMajority(t *testing.T) {
	t.Parallel()
	ms := newMembers(t, 3)
	initial := initialCluster(ms)

	// Given up: Start returns soon after its context ends.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	began := time.Now()
	s, err := ms[0].start(ctx, t, initial, false)
	cancel()
	if err == nil {
		s.Close()
		t.Fatal("a member alone among three started")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("start given up: %v, want the context's deadline", err)
	}
	if took := time.Since(began); took > 10*time.Second {
		t.Fatalf("a start given up after 2 s returned after %s", took)
	}

	// Waiting: ready once a second member starts, however late.
	type result struct {
		s   *Server
		err error
	}
	first := make(chan result, 1)
	go func() {
		s, err := ms[0].start(t.Context(), t, initial, false)
		first <- result{s, err}
	}()
	select {
	case r := <-first:
		t.Fatalf("a member alone among three returned: %v", r.err)
	case <-time.After(3 * time.Second): // it must still be waiting: nothing to poll for
	}
	second, err := ms[1].start(t.Context(), t, initial, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { second.Close() })
	r := <-first
	if r.err != nil {
		t.Fatalf("the waiting member: %v", r.err)
	}
	t.Cleanup(func() { r.s.Close() })
	if err := putWithLeader(t.Context(), r.s, "/majority"); err != nil {
		t.Fatal(err)
	}
}

// The controllers' leader hands etcd's raft leadership to a live member
// when its own member holds it, never to a dead one; on a follower there
// is nothing to do.
func TestMoveRaftLeadershipAway(t *testing.T) {
	t.Parallel()
	servers := startAll(t, newMembers(t, 3))
	leads := func(s *Server) bool { return s.etcd.Server.Leader() == s.etcd.Server.MemberID() }
	var leader *Server
	var followers []*Server
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		leader, followers = nil, nil
		for _, s := range servers {
			if leads(s) {
				leader = s
			} else {
				followers = append(followers, s)
			}
		}
		return leader != nil && len(followers) == 2, nil
	}); err != nil {
		t.Fatal("no raft leader")
	}
	if moved, err := followers[0].moveRaftLeadershipAway(t.Context()); err != nil || moved {
		t.Fatalf("on a follower: moved %v, %v; want nothing done", moved, err)
	}
	// One follower dies — the one tried first, and at once, before any
	// stream to it breaks: the leadership must go to the other.
	if followers[1].etcd.Server.MemberID() < followers[0].etcd.Server.MemberID() {
		followers[0], followers[1] = followers[1], followers[0]
	}
	followers[0].Close()
	moved, err := leader.moveRaftLeadershipAway(t.Context())
	if err != nil || !moved {
		t.Fatalf("on the leader: moved %v, %v", moved, err)
	}
	if !leads(followers[1]) {
		t.Fatalf("the live follower does not lead after the hand-over (leader %s)", leader.etcd.Server.Leader())
	}
	if err := putWithLeader(t.Context(), leader, "/after-move"); err != nil {
		t.Fatal(err)
	}
}
