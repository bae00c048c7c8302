package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/virtplane/terraform-provider-virtplane/internal/bench"
	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
)

// The test:///default VMs' placement accounting: the smallest guest memory
// the API accepts and a 1Mi overhead (0 would mean the 160Mi default), so
// that 1,000 of them fit the node's allocatable memory. The test driver
// runs no guest.
const (
	testDriverMemory   = "16Mi"
	testDriverOverhead = "1Mi"
)

// throughputTest runs n VMs with real launchers on libvirt's test driver.
func throughputTest(ctx context.Context, e *env, n, workers int) (tpResult, error) {
	ns := e.prefix + "-tpt"
	a, err := e.startAgent(ctx, bench.AgentConfig{Dir: filepath.Join(e.work, "tp-test"), Role: bench.RoleAll, NodeName: ns,
		LibvirtURI: "test:///default", MemoryOverhead: testDriverOverhead, CPUAllocationRatio: cpuRatio(n)})
	if err != nil {
		return tpResult{}, err
	}
	defer func() { _ = e.teardown(ns, a) }()
	r, err := measureThroughput(ctx, e, a, ns, n, workers, testDriverMemory)
	r.nodes = 1 // the agent's own node
	if err != nil {
		return r, err
	}
	r.extra = append(r.extra, fmt.Sprintf("agent flags `--cpu-allocation-ratio %d --vm-memory-overhead %s`, guests %s.", cpuRatio(n), testDriverOverhead, testDriverMemory))
	ls := procfs.Launchers(e.launcher, ns)
	var rss, anon, pss, priv, threads int64
	for _, pid := range ls {
		st, err := procfs.ProcStatus(pid, "VmRSS", "RssAnon", "Threads")
		if err != nil {
			continue
		}
		p, _ := procfs.Pss(pid)
		pr, _ := procfs.Private(pid)
		rss, anon, pss, priv, threads = rss+st["VmRSS"], anon+st["RssAnon"], pss+p, priv+pr, threads+st["Threads"]
	}
	if k := int64(len(ls)); k > 0 {
		r.extra = append(r.extra, fmt.Sprintf("%d launcher processes: per launcher VmRSS %s, RssAnon %s, Pss %s, private %s, %d threads (all launchers: Pss %s, %d threads); agent VmRSS %s at the end, %d threads.",
			k, bench.MiB(rss/k), bench.MiB(anon/k), bench.MiB(pss/k), bench.MiB(priv/k), threads/k, bench.MiB(pss), threads, bench.MiB(r.agentRSS), procfs.Threads(a.Pid())))
	}
	return r, nil
}
