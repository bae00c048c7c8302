package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/bench"
	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
)

var recoveryCfg struct{ n int }

var recoveryBench = &measurement{
	name: "recovery", id: "6-recovery", title: "6. Recovery: node agent SIGKILLed and restarted with N running VMs",
	flags: func(fs *flag.FlagSet, full bool) func() string {
		fs.IntVar(&recoveryCfg.n, "n", byMode(full, 10, 50), "running VMs")
		return func() string { return fmt.Sprintf("-n %d", recoveryCfg.n) }
	},
	run: runRecovery,
}

// guestProcs are the processes behind one VM.
type guestProcs struct{ qemu, launcher int }

func runRecovery(ctx context.Context, e *env, s *bench.Section) error {
	n := recoveryCfg.n
	ns := e.prefix + "-rec"
	dir := filepath.Join(e.work, "recovery")
	s.Setup = []string{
		fmt.Sprintf("Two agent processes: `serve --role server --vm-memory-overhead %s --cpu-allocation-ratio %d` (API, etcd, controllers) and `serve --role node` (the node agent) against its socket, on %s. Only the node agent is killed.", densityOverhead, cpuRatio(n), e.uri),
		fmt.Sprintf("%d VMs of the density shape (%s, no OS) Running, then 3 s of quiet; SIGKILL to the node agent, and as soon as it is reaped the same command is started again.", n, densityMemory),
		"Reconciled: the restarted node agent has reattached to the VMI's launcher and re-synced the VMI through it — its log line `domain synced` for that VMI (the first Sync of a launcher handle in a run, which reads the domain's state from libvirt; statuses that did not change are not written). Times from the restart (exec of the new process), and from the SIGKILL; log timestamps are the agent's.",
		"Restarted guests: VMs whose QEMU pid changed or is gone; new launchers: `launched launcher` lines of the restarted agent.",
	}
	srv, err := e.startAgent(ctx, bench.AgentConfig{Dir: filepath.Join(dir, "server"), Role: bench.RoleServer,
		MemoryOverhead: densityOverhead, CPUAllocationRatio: cpuRatio(n)})
	if err != nil {
		return err
	}
	node, err := e.startAgent(ctx, bench.AgentConfig{Dir: filepath.Join(dir, "node"), Role: bench.RoleNode, NodeName: ns, Server: srv.Socket})
	if err != nil {
		return err
	}
	defer func() { _ = e.teardown(ns, node, srv) }()
	c, tr, done, err := track(ctx, srv, ns)
	if err != nil {
		return err
	}
	defer done()
	vms := make([]*apiv1.VirtualMachine, n)
	for i := range vms {
		vms[i] = bench.NoOSVM(ns, bench.VMName(i), densityMemory)
	}
	if err := bench.CreateAll(ctx, c, vms, 4); err != nil {
		return err
	}
	if err := tr.WaitVMsRunning(ctx, n, 10*time.Minute, watchdog(e, "recovery")); err != nil {
		return err
	}
	time.Sleep(3 * time.Second)
	before, uids := map[string]guestProcs{}, map[string]string{}
	launchers := procfs.Launchers(e.launcher, ns)
	for i := range n {
		d := apiv1.DomainName(ns, bench.VMName(i))
		before[d] = guestProcs{qemu: procfs.QEMUPid(d), launcher: launchers[d]}
		if before[d].qemu == 0 || before[d].launcher == 0 {
			return fmt.Errorf("%s: QEMU pid %d, launcher pid %d before the kill", d, before[d].qemu, before[d].launcher)
		}
		uids[bench.VMName(i)] = tr.VMI(bench.VMName(i)).GetMetadata().GetUid()
	}

	killed := time.Now()
	if err := node.Kill(); err != nil {
		return err
	}
	if err := node.Restart(); err != nil {
		return err
	}
	restarted := node.Started
	want := map[string]bool{}
	for i := range n {
		want[ns+"/"+bench.VMName(i)] = true
	}
	var synced []bench.LogRecord
	if err := waitUntil(ctx, 2*time.Minute, "every VMI re-synced", func() bool {
		synced = synced[:0]
		for _, r := range bench.Matching(node.Log, "domain synced") {
			if want[r.Str("vmi")] {
				synced = append(synced, r)
			}
		}
		return len(synced) >= n
	}); err != nil {
		return err
	}
	running, err := bench.WaitLog(ctx, node.Proc, "node agent running", time.Minute)
	if err != nil {
		return err
	}
	last := slices.MaxFunc(synced, func(a, b bench.LogRecord) int { return a.Time.Compare(b.Time) }).Time
	first := slices.MinFunc(synced, func(a, b bench.LogRecord) int { return a.Time.Compare(b.Time) }).Time
	// Let anything the restart set off happen before judging.
	time.Sleep(5 * time.Second)

	restartedGuests, newLaunchers := 0, len(bench.Matching(node.Log, "launched launcher"))
	after := procfs.Launchers(e.launcher, ns)
	sameLaunchers := 0
	for d, p := range before {
		if q := procfs.QEMUPid(d); q != p.qemu {
			restartedGuests++
		}
		if after[d] == p.launcher {
			sameLaunchers++
		}
	}
	notRunning := 0
	for name, uid := range uids {
		v, err := c.VMIs.Get(ctx, &apiv1.GetVirtualMachineInstanceRequest{Key: &apiv1.ObjectKey{Namespace: ns, Name: name}})
		if err != nil || v.GetMetadata().GetUid() != uid || v.GetStatus().GetPhase() != apiv1.PhaseRunning {
			notRunning++
		}
	}
	s.NewTable(fmt.Sprintf("Node agent SIGKILL and restart, %d running VMs", n), "Measure", "Value")
	s.AddRow("SIGKILL → restarted process exec'd (the benchmark waits for the reap)", bench.Secs(restarted.Sub(killed)))
	s.AddRow("restart → node agent handling VMIs (`node agent running`: reattached, registered, heartbeat, VMI list synced)", bench.Secs(running.Time.Sub(restarted)))
	s.AddRow("restart → first VMI reconciled", bench.Secs(first.Sub(restarted)))
	s.AddRow("restart → every VMI reconciled", bench.Secs(last.Sub(restarted)))
	s.AddRow("SIGKILL → every VMI reconciled", bench.Secs(last.Sub(killed)))
	s.AddRow("guests restarted (QEMU pid changed or gone)", fmt.Sprint(restartedGuests))
	s.AddRow("launchers started by the restarted agent / launchers kept", fmt.Sprintf("%d / %d", newLaunchers, sameLaunchers))
	s.AddRow("VMIs not Running with the same uid afterwards", fmt.Sprint(notRunning))
	took := last.Sub(restarted)
	s.Target(fmt.Sprintf("recovery, restart → every VMI reconciled (%d VMs)", n), "≤ 2 s", bench.Secs(took), took <= 2*time.Second)
	s.Target(fmt.Sprintf("guests restarted by the recovery (%d VMs)", n), "0", fmt.Sprint(restartedGuests), restartedGuests == 0)
	return nil
}
