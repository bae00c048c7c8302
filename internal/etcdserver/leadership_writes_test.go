package etcdserver

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/wait"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Writes through the store, made as the API makes them (failing at once
// when the member knows no leader), all succeed while raft leadership
// moves between the members: a hand-over leaves the members without a
// leader for a moment, and the controllers' leader makes one each time
// it takes over (KeepRaftLeadershipAway). Users must not see "no
// quorum" for that.
func TestStoreWritesSurviveLeadershipMoves(t *testing.T) {
	t.Parallel()
	servers := startAll(t, newMembers(t, 3))
	vms := store.New(servers[0].Client(), store.VirtualMachines, store.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		writes int
		failed []error
	)
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			vm := &apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("vm-%d", i)}}
			wctx, wcancel := context.WithTimeout(clientv3.WithRequireLeader(ctx), 10*time.Second)
			_, err := vms.Create(wctx, proto.Clone(vm).(*apiv1.VirtualMachine))
			wcancel()
			mu.Lock()
			if err != nil && ctx.Err() == nil {
				failed = append(failed, err)
			} else if err == nil {
				writes++
			}
			mu.Unlock()
		}
	})
	const moves = 6
	for range moves {
		var leader *Server
		if err := wait.PollUntilContextTimeout(t.Context(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			for _, s := range servers {
				if s.etcd.Server.Leader() == s.etcd.Server.MemberID() {
					leader = s
					return true, nil
				}
			}
			return false, nil
		}); err != nil {
			t.Fatal("no raft leader")
		}
		if moved, err := leader.moveRaftLeadershipAway(t.Context()); err != nil || !moved {
			t.Fatalf("moving raft leadership: moved %v, %v", moved, err)
		}
	}
	cancel()
	wg.Wait()
	t.Logf("%d writes during %d leadership moves", writes, moves)
	if len(failed) > 0 {
		t.Fatalf("%d of %d writes failed during leadership moves, first: %v", len(failed), writes+len(failed), failed[0])
	}
	if writes == 0 {
		t.Fatal("no write went through")
	}
}
