package ceph

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/proc"
)

// PidsUsing lists the live processes with an argument that holds path
// (a cluster's Conf): its daemons and any CLI still talking to it.
func PidsUsing(path string) []int { return procfs.PidsWithArg(path) }

// killUsers SIGKILLs the processes using path until none is left.
func killUsers(path string) error {
	var alive []int
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, proc.KillWait, true, func(context.Context) (bool, error) {
		alive = PidsUsing(path)
		for _, pid := range alive {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		return len(alive) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("processes %v using %s survive SIGKILL: %w", alive, path, err)
	}
	return nil
}
