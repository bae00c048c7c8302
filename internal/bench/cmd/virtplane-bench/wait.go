package main

import (
	"context"
	"fmt"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"k8s.io/apimachinery/pkg/util/wait"
)

// waitUntil checks cond at once and then every 10 ms until it holds, ctx
// ends or timeout passes. The latencies the benchmarks report come from
// the tracker's timestamps, not from when this returns.
func waitUntil(ctx context.Context, timeout time.Duration, what string, cond func() bool) error {
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	default:
		return fmt.Errorf("timed out after %s waiting for %s", timeout, what)
	}
}

// minMemAvailable is the host memory a benchmark leaves free: below it the
// wait fails rather than push the host into the OOM killer.
const minMemAvailable = 3 << 20 // KiB

// stallLimit is how long a wait may see no VM reach Running before it
// gives up (a VMI that cannot be placed never will).
const stallLimit = 90 * time.Second

// watchdog logs progress every 10 s of a long wait and fails it when the
// host runs low on memory or nothing progressed for stallLimit.
func watchdog(e *env, what string) func(vmis, vms int) error {
	var logged time.Time
	moved, lastVMIs, lastVMs := time.Now(), -1, -1
	return func(vmis, vms int) error {
		avail := procfs.MemAvailableKiB()
		if time.Since(logged) >= 10*time.Second {
			logged = time.Now()
			e.log.Info("waiting", "benchmark", what, "vmis_running", vmis, "vms_running", vms, "mem_available_mib", avail/1024)
		}
		if avail > 0 && avail < minMemAvailable {
			return fmt.Errorf("stopped: the host has only %d MiB of memory available (at %d VMIs Running)", avail/1024, vmis)
		}
		if vmis != lastVMIs || vms != lastVMs {
			moved, lastVMIs, lastVMs = time.Now(), vmis, vms
		} else if time.Since(moved) > stallLimit {
			return fmt.Errorf("no progress for %s at %d VMIs and %d VMs Running (see the agent log)", stallLimit, vmis, vms)
		}
		return nil
	}
}
