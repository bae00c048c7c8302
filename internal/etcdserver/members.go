package etcdserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Member is one member of the etcd cluster as the cluster lists it.
type Member struct {
	ID         uint64
	Name       string // empty until an added member first started
	PeerURLs   []string
	ClientURLs []string
	Learner    bool
}

// IDString is the member ID as etcd prints it (hex).
func (m Member) IDString() string { return strconv.FormatUint(m.ID, 16) }

// ListMembers lists the cluster's members, by name.
func ListMembers(ctx context.Context, cli *clientv3.Client) ([]Member, error) {
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing etcd members: %w", err)
	}
	out := make([]Member, 0, len(resp.Members))
	for _, m := range resp.Members {
		out = append(out, Member{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, Learner: m.IsLearner})
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// reconfigure runs a membership change, again while etcd refuses it as
// unhealthy: it does until the member asked has been connected to a
// majority for its health interval (5 s), e.g. right after the previous
// member joined or a peer restarted. Waiting that out spares the operator
// a retry; a cluster with members down still fails after reconfigSettle.
func reconfigure(ctx context.Context, change func(context.Context) error) error {
	var err error
	werr := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, reconfigSettle, true, func(ctx context.Context) (bool, error) {
		err = change(ctx)
		return !errors.Is(err, rpctypes.ErrUnhealthy), nil
	})
	if err == nil && werr != nil {
		return werr
	}
	return err
}

// reconfigSettle bounds the wait for etcd to accept a membership change
// after its peers (re)connected: twice its health interval.
const reconfigSettle = 10 * time.Second

// AddMember adds a member called name with peerURLs to the cluster, as a
// learner: it does not count toward quorum until it started, caught up
// and promoted itself (Peer.Join), so adding it never costs the cluster
// its majority. It returns the initial cluster the new member starts with.
func AddMember(ctx context.Context, cli *clientv3.Client, name string, peerURLs []string) (string, error) {
	if err := ValidMemberName(name); err != nil {
		return "", err
	}
	if _, err := ParsePeerURLs(peerURLs); err != nil {
		return "", err
	}
	members, err := ListMembers(ctx, cli)
	if err != nil {
		return "", err
	}
	for _, m := range members {
		if m.Name == name {
			return "", fmt.Errorf("a member called %s exists already (ID %s); remove it first to replace it", name, m.IDString())
		}
		if m.Name == "" {
			return "", fmt.Errorf("member %s (peer URLs %v) was added but never started; start it or remove it before adding another", m.IDString(), m.PeerURLs)
		}
		for _, u := range m.PeerURLs {
			if slices.Contains(peerURLs, u) {
				return "", fmt.Errorf("member %s uses the peer URL %s already", m.Name, u)
			}
		}
		if slices.Contains(m.PeerURLs, PeerURL) { // the placeholder of a member that runs alone
			return "", fmt.Errorf("member %s runs alone (peer URL %s): restart its server with --etcd-peer-listen first", m.Name, PeerURL)
		}
	}
	err = reconfigure(ctx, func(ctx context.Context) error {
		_, err := cli.MemberAddAsLearner(ctx, peerURLs)
		return err
	})
	if errors.Is(err, rpctypes.ErrUnhealthy) {
		return "", fmt.Errorf("adding etcd member %s: %w: etcd adds a member only while this one has been connected to a majority for 5 s; are members down?", name, err)
	}
	if err != nil {
		return "", fmt.Errorf("adding etcd member %s: %w", name, err)
	}
	var parts []string
	for _, m := range members {
		for _, u := range m.PeerURLs {
			parts = append(parts, m.Name+"="+u)
		}
	}
	for _, u := range peerURLs {
		parts = append(parts, name+"="+u)
	}
	return strings.Join(parts, ","), nil
}

// RemoveMember removes the member called name (or with that hex ID), e.g.
// a dead one before its replacement is added. etcd refuses a removal that
// would leave too few started members for a majority.
func RemoveMember(ctx context.Context, cli *clientv3.Client, name string) (Member, error) {
	members, err := ListMembers(ctx, cli)
	if err != nil {
		return Member{}, err
	}
	i := slices.IndexFunc(members, func(m Member) bool { return m.Name == name || m.IDString() == name })
	if i < 0 {
		var names []string
		for _, m := range members {
			names = append(names, m.Name)
		}
		return Member{}, fmt.Errorf("no etcd member called %s (members: %s)", name, strings.Join(names, ", "))
	}
	if len(members) == 1 {
		return Member{}, fmt.Errorf("member %s is the only one; removing it would end the cluster", name)
	}
	err = reconfigure(ctx, func(ctx context.Context) error {
		_, err := cli.MemberRemove(ctx, members[i].ID)
		return err
	})
	if err != nil {
		if errors.Is(err, rpctypes.ErrUnhealthy) {
			return Member{}, fmt.Errorf("removing etcd member %s: %w: etcd removes a member only when that leaves a majority of started members, all connected to each other for the last 5 s; start the members that are down", name, err)
		}
		return Member{}, fmt.Errorf("removing etcd member %s: %w", name, err)
	}
	return members[i], nil
}
