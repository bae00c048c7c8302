package etcdserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
	etcderrors "go.etcd.io/etcd/server/v3/etcdserver/errors"
)

// Peer makes the embedded member one of a cluster of embedded members:
// it listens for raft traffic on URLs, forms the cluster InitialCluster
// names or joins a running one, and speaks to the other members only
// over mutual TLS.
type Peer struct {
	// URLs are the peer URLs this member listens on and advertises:
	// https://host:port, where host is an address or name the other
	// members reach it at (not 0.0.0.0; ParsePeerURLs).
	URLs []string
	// InitialCluster is "name=https://host:port,..." with this member
	// among them, as etcd's --initial-cluster; only this member when
	// empty. Read only when the data dir is new.
	InitialCluster string
	// Join says the member was added to a running cluster (AddMember, as
	// a learner); Start promotes it to a voting member once it caught up.
	// Read only when the data dir is new.
	Join bool
	// TLS are the member's peer certificate and key (both server and
	// client use, pki.EnsureEtcdPeer) and the CA of the other members'.
	TLS PeerTLS
}

// PeerTLS are PEM files; members let in only peers whose certificate the
// CA signed for pki.EtcdPeerName.
type PeerTLS struct {
	CertFile, KeyFile, CAFile string
	// AllowedCN is the common name a peer's certificate must carry.
	AllowedCN string
}

// clusterToken seeds the cluster ID of a cluster formed from several
// members at once: the same for all of them.
const clusterToken = "virtplane-cluster"

// promoteRetry is how often a joining learner asks to be promoted while
// it is still catching up.
const promoteRetry = 200 * time.Millisecond

// memberName is what etcd takes as a member name and we as a flag value
// and command argument.
var memberName = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$`)

// ValidMemberName reports why name cannot name a member, or nil.
func ValidMemberName(name string) error {
	if !memberName.MatchString(name) {
		return fmt.Errorf("member name %q: want lower-case letters, digits, '.' and '-', 1-63 characters, starting and ending with a letter or digit", name)
	}
	return nil
}

// ParsePeerURLs checks peer URLs: https only (raft traffic carries every
// object, so never in the clear), with a port and a host the other
// members can dial.
func ParsePeerURLs(urls []string) ([]url.URL, error) {
	if len(urls) == 0 {
		return nil, errors.New("no peer URLs")
	}
	var out []url.URL
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil {
			return nil, fmt.Errorf("peer URL %q: %w", s, err)
		}
		if u.Scheme != "https" {
			return nil, fmt.Errorf("peer URL %q: want https://host:port (peers speak mutual TLS only)", s)
		}
		if u.Port() == "" || u.Hostname() == "" || (u.Path != "" && u.Path != "/") {
			return nil, fmt.Errorf("peer URL %q: want https://host:port", s)
		}
		if ip := net.ParseIP(u.Hostname()); ip != nil && ip.IsUnspecified() {
			return nil, fmt.Errorf("peer URL %q: other members cannot dial %s; name this host's address", s, u.Hostname())
		}
		out = append(out, url.URL{Scheme: u.Scheme, Host: u.Host})
	}
	return out, nil
}

// ParseInitialCluster checks "name=url,name=url" and returns the peer
// URLs by member name.
func ParseInitialCluster(s string) (map[string][]string, error) {
	out := map[string][]string{}
	for entry := range strings.SplitSeq(s, ",") {
		name, u, ok := strings.Cut(strings.TrimSpace(entry), "=")
		if !ok {
			return nil, fmt.Errorf("entry %q: want name=https://host:port", entry)
		}
		if err := ValidMemberName(name); err != nil {
			return nil, fmt.Errorf("entry %q: %w", entry, err)
		}
		if _, err := ParsePeerURLs([]string{u}); err != nil {
			return nil, fmt.Errorf("entry %q: %w", entry, err)
		}
		out[name] = append(out[name], u)
	}
	return out, nil
}

// configure makes ec a member of the cluster p describes.
func (p *Peer) configure(ec *embed.Config) error {
	urls, err := ParsePeerURLs(p.URLs)
	if err != nil {
		return fmt.Errorf("etcdserver: %w", err)
	}
	initial := p.InitialCluster
	if initial == "" {
		var parts []string
		for _, u := range urls {
			parts = append(parts, ec.Name+"="+u.String())
		}
		initial = strings.Join(parts, ",")
	}
	members, err := ParseInitialCluster(initial)
	if err != nil {
		return fmt.Errorf("etcdserver: initial cluster: %w", err)
	}
	mine, ok := members[ec.Name]
	if !ok {
		return fmt.Errorf("etcdserver: initial cluster %q does not name this member %q", initial, ec.Name)
	}
	for _, u := range urls {
		if !slices.Contains(mine, u.String()) {
			return fmt.Errorf("etcdserver: initial cluster gives member %s the peer URLs %v, but it listens on %s", ec.Name, mine, u.String())
		}
	}
	t := p.TLS
	if t.CertFile == "" || t.KeyFile == "" || t.CAFile == "" {
		return errors.New("etcdserver: peer TLS needs a certificate, a key and a CA")
	}
	ec.ListenPeerUrls = urls
	ec.AdvertisePeerUrls = urls
	ec.InitialCluster = initial
	ec.InitialClusterToken = clusterToken
	ec.ClusterState = embed.ClusterStateFlagNew
	if p.Join {
		ec.ClusterState = embed.ClusterStateFlagExisting
	}
	ec.PeerTLSInfo.CertFile = t.CertFile
	ec.PeerTLSInfo.KeyFile = t.KeyFile
	ec.PeerTLSInfo.TrustedCAFile = t.CAFile
	ec.PeerTLSInfo.ClientCertAuth = true
	if t.AllowedCN != "" {
		ec.PeerTLSInfo.AllowedCNs = []string{t.AllowedCN}
	}
	return nil
}

// settle finishes a start with peers: a joining learner waits to be
// promoted, and a member that ran alone before (its data dir's peer URL
// is the never-dialed PeerURL) announces its real peer URLs, so that
// others can be added.
func (p *Peer) settle(ctx context.Context, e *embed.Etcd) error {
	srv := e.Server
	id := srv.MemberID()
	// The leader promotes a learner only once it caught up; after the
	// promotion is committed this member applies it a moment later.
	promoted := false
	for srv.IsLearner() {
		if !promoted {
			_, err := srv.PromoteMember(ctx, uint64(id))
			switch {
			case err == nil, errors.Is(err, membership.ErrMemberNotLearner):
				promoted = true
			case errors.Is(err, etcderrors.ErrLearnerNotReady), errors.Is(err, etcderrors.ErrNotEnoughStartedMembers):
			default:
				return fmt.Errorf("etcdserver: promoting this member from learner: %w", err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("etcdserver: still a learner (promoted: %v), not caught up with the leader: %w", promoted, ctx.Err())
		case <-time.After(promoteRetry):
		}
	}
	m := srv.Cluster().Member(id)
	if m == nil {
		return fmt.Errorf("etcdserver: member %s is not in its own cluster", id)
	}
	var want []string
	for _, u := range e.Config().AdvertisePeerUrls {
		want = append(want, u.String())
	}
	have := slices.Sorted(slices.Values(m.PeerURLs))
	if slices.Equal(have, slices.Sorted(slices.Values(want))) {
		return nil
	}
	if _, err := srv.UpdateMember(ctx, membership.Member{ID: id, RaftAttributes: membership.RaftAttributes{PeerURLs: want}}); err != nil {
		return fmt.Errorf("etcdserver: announcing peer URLs %v (were %v): %w", want, m.PeerURLs, err)
	}
	return nil
}
