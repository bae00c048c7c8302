package store

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A write raft dropped or a member refused for want of a leader (never
// applied either way) is sent again; any other error is returned at once.
func TestCommitRetriesDroppedProposals(t *testing.T) {
	dropped := status.Error(codes.Unknown, "raft proposal dropped")
	if !IsProposalDropped(fmt.Errorf("txn: %w", dropped)) || IsProposalDropped(status.Error(codes.Unknown, "other")) || IsProposalDropped(errors.New("raft proposal dropped")) {
		t.Fatal("IsProposalDropped misjudges")
	}
	for _, tc := range []struct {
		name  string
		errs  []error
		calls int
		fails bool
	}{
		{"dropped twice", []error{dropped, dropped, nil}, 3, false},
		{"no leader, then dropped", []error{rpctypes.ErrNoLeader, dropped, nil}, 3, false},
		{"other error", []error{errors.New("no space")}, 1, true},
		{"dropped every time", []error{dropped, dropped, dropped, dropped, dropped, dropped, dropped, dropped, dropped}, droppedBackoff.Steps, true},
	} {
		calls := 0
		_, err := commitTxn(context.Background(), func() (*clientv3.TxnResponse, error) {
			err := tc.errs[calls]
			calls++
			if err != nil {
				return nil, err
			}
			return &clientv3.TxnResponse{}, nil
		})
		if calls != tc.calls || (err != nil) != tc.fails {
			t.Errorf("%s: %d calls, %v; want %d calls, failing %v", tc.name, calls, err, tc.calls, tc.fails)
		}
	}
}
