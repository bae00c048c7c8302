package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/bench"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/fakenode"
	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
)

var throughputCfg struct {
	fake      intList
	fakeNodes intList
	test      int
	workers   int
	profile   bool
	reads     int
	pprof     bool
}

// nodesFor is the fake nodes of the i-th fake size: the i-th of
// -fake-nodes, or its last entry when it has fewer.
func nodesFor(i int) int {
	l := throughputCfg.fakeNodes
	return l[min(i, len(l)-1)]
}

// intList is a comma-separated list of sizes.
type intList []int

func (l *intList) String() string {
	var s []string
	for _, v := range *l {
		s = append(s, strconv.Itoa(v))
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	*l = nil
	if v == "" {
		return nil
	}
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("%q is not a positive count", f)
		}
		*l = append(*l, n)
	}
	return nil
}

var throughputBench = &measurement{
	name: "throughput", id: "3-throughput", title: "3. Control-plane throughput: N VMs until all Running",
	flags: func(fs *flag.FlagSet, full bool) func() string {
		throughputCfg.fake = byMode(full, intList{1000}, intList{1000, 10000, 100000})
		fs.Var(&throughputCfg.fake, "fake", "sizes run on fake nodes (control plane only), comma-separated; empty skips")
		throughputCfg.fakeNodes = byMode(full, intList{10}, intList{10, 10, 1000})
		fs.Var(&throughputCfg.fakeNodes, "fake-nodes", "fake nodes of each -fake size, comma-separated; the last applies to the sizes after it")
		fs.IntVar(&throughputCfg.test, "test", byMode(full, 200, 1000), "VMs with real launchers on libvirt's test:///default driver; 0 skips")
		fs.IntVar(&throughputCfg.workers, "workers", 16, "concurrent API create calls")
		fs.BoolVar(&throughputCfg.profile, "profile", true, "when the 10,000 target is missed, profile the control plane (in-process) on the largest fake size")
		fs.IntVar(&throughputCfg.reads, "reads", 3, "runs of each read timed once a fake size is Running (CLI get, terraform data source); 0 skips them")
		fs.BoolVar(&throughputCfg.pprof, "agent-pprof", false, "run the agents with --pprof and save a 30 s CPU profile (from the first create) and a heap profile (all Running) of the largest fake size")
		return func() string {
			f := fmt.Sprintf("-fake %s -fake-nodes %s -test %d -workers %d -reads %d", throughputCfg.fake.String(), throughputCfg.fakeNodes.String(), throughputCfg.test, throughputCfg.workers, throughputCfg.reads)
			if throughputCfg.pprof {
				f += " -agent-pprof"
			}
			return f
		}
	},
	run: runThroughput,
}

// tpResult is one throughput run.
type tpResult struct {
	n                  int
	created, vmis, vms time.Duration // from the first create: all created, all VMIs Running, all VMs Running+ready
	nodes              int
	writes             bench.StoreCounts
	agentCPU           float64 // seconds, during the run
	agentHWM, agentRSS int64   // kB at the end
	benchCPU           float64 // this process (fake nodes, client), seconds
	extra              []string
	scale              *scaleResult // fake sizes, with -reads
}

func runThroughput(ctx context.Context, e *env, s *bench.Section) error {
	cfg := throughputCfg
	s.Setup = []string{
		fmt.Sprintf("VMs: %s guest memory, 1 vCPU, no disk, no kernel, run strategy Always, created through the API by %d concurrent callers as fast as they return; the clock starts at the first create and stops when every VMI is Running and every VM Running + ready (API watch).", densityMemory, cfg.workers),
		fmt.Sprintf("Fake path (control plane only): `serve --role server` (API, embedded etcd, controllers; no node agent) and `internal/fakenode` nodes (%s for the sizes %s) in the benchmark process, each with a client connection of its own, that move every VMI placed on them to Running at once (one status write, like the node agent's). Fake nodes report 1000 CPUs and 4Ti each; agent defaults otherwise.", cfg.fakeNodes.String(), cfg.fake.String()),
		fmt.Sprintf("Real-launcher path: `serve --role all --libvirt-uri test:///default --vm-memory-overhead %s --cpu-allocation-ratio R` and %s guests: one real virtplane-launcher process per VM, each with libvirt's in-process test driver (no QEMU, no libvirtd). Guest memory and overhead are placement accounting only (the test driver runs no guest); they let %d VMs be placed on this host's memory (an overhead of 0 means the 160Mi default).", testDriverOverhead, testDriverMemory, cfg.test),
		"Store writes per VM: agent's virtplane_store_writes_total (VM and VMI kinds) and etcd revision delta over the run, divided by N. Agent CPU: utime + stime of the agent process (/proc/<pid>/stat) during the run. Peak RSS: VmHWM of the agent process (a fresh process per run).",
	}
	var results []tpResult
	for i, n := range cfg.fake {
		r, err := throughputFake(ctx, e, n, nodesFor(i), cfg.workers, i == len(cfg.fake)-1 && cfg.pprof)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	var test *tpResult
	if cfg.test > 0 {
		r, err := throughputTest(ctx, e, cfg.test, cfg.workers)
		if err != nil {
			return err
		}
		test = &r
	}
	s.NewTable("Time to all Running", "Path", "N", "Nodes", "All created", "All VMIs Running", "All VMs Running + ready", "VMs/s", "Writes per VM (VM+VMI)", "etcd revisions per VM", "Agent CPU", "Agent CPU per VM", "Agent peak RSS (VmHWM)")
	row := func(path string, r tpResult) {
		s.AddRow(path, strconv.Itoa(r.n), strconv.Itoa(r.nodes), bench.Secs(r.created), bench.Secs(r.vmis), bench.Secs(r.vms),
			fmt.Sprintf("%.0f", float64(r.n)/r.vms.Seconds()),
			fmt.Sprintf("%.2f", r.writes.Writes.VMAndVMI()/float64(r.n)),
			fmt.Sprintf("%.2f", float64(r.writes.Revision)/float64(r.n)),
			fmt.Sprintf("%.1f s", r.agentCPU), fmt.Sprintf("%.2f ms", r.agentCPU*1000/float64(r.n)), bench.MiB(r.agentHWM))
	}
	for _, r := range results {
		row("fake nodes (control plane only)", r)
	}
	if test != nil {
		row("real launchers, test:///default", *test)
	}
	addScaleTable(s, results, cfg.reads)
	for _, r := range results {
		s.Note("Fake path, N=%d: the benchmark process (fake nodes, creates, watch) used %.1f s of CPU besides the agent's.", r.n, r.benchCPU)
	}
	if test != nil {
		for _, x := range test.extra {
			s.Note("Real-launcher path, N=%d: %s", test.n, x)
		}
	}
	for _, r := range results {
		if r.n == 10000 {
			met := r.vms <= 60*time.Second
			s.Target("10,000 VMs Running (fake nodes)", "≤ 60 s", bench.Secs(r.vms), met)
			if !met && cfg.profile {
				prof, err := profileControlPlane(ctx, e, r.n, r.nodes, cfg.workers)
				if err != nil {
					s.Note("Profiling failed: %v", err)
					continue
				}
				s.Profiles = append(s.Profiles, prof.files...)
				s.Note("Target missed, so the run was repeated with the server role in the benchmark process under the Go CPU profiler (the agent serves no pprof endpoint: its metrics listener has /metrics and /healthz only). Profiled run: %d VMs Running in %s. Largest cumulative CPU shares in virtplane code (of all CPU of the process, fake nodes and client included): %s.",
					r.n, bench.Secs(prof.took), strings.Join(prof.top, "; "))
			}
		}
	}
	return nil
}

// throughputFake runs n VMs on fake nodes against a server-only agent,
// then measures the store and reads at that size; with pprof, it saves the
// agent's CPU profile of the first 30 s and its heap once all run.
func throughputFake(ctx context.Context, e *env, n, nodes, workers int, pprof bool) (tpResult, error) {
	ns := fmt.Sprintf("%s-tpf%d", e.prefix, n)
	cfg := bench.AgentConfig{Dir: filepath.Join(e.work, "tp-fake-"+strconv.Itoa(n)), Role: bench.RoleServer}
	if pprof {
		cfg.Extra = []string{"--pprof"}
	}
	a, err := e.startAgent(ctx, cfg)
	if err != nil {
		return tpResult{}, err
	}
	defer func() { _ = a.Kill() }()
	stop, err := startFakeNodes(ctx, "unix://"+a.Socket, ns, nodes)
	if err != nil {
		return tpResult{}, err
	}
	defer stop()
	var sr scaleResult
	cpuDone := make(chan error, 1)
	if pprof {
		go func() {
			var err error
			sr.cpuProfile, err = agentProfile(ctx, e, a, "profile", "?seconds=30", fmt.Sprintf("throughput-%d-agent-cpu.pprof", n))
			cpuDone <- err
		}()
	} else {
		cpuDone <- nil
	}
	r, err := measureThroughput(ctx, e, a, ns, n, workers, densityMemory)
	r.nodes = nodes
	if perr := <-cpuDone; perr != nil {
		e.log.Warn("agent CPU profile", "err", perr)
	}
	if err != nil {
		return r, err
	}
	if pprof {
		if sr.heapProf, err = agentProfile(ctx, e, a, "heap", "?gc=1", fmt.Sprintf("throughput-%d-agent-heap.pprof", n)); err != nil {
			e.log.Warn("agent heap profile", "err", err)
		}
	}
	if throughputCfg.reads > 0 {
		etcd, err := bench.DialEtcd(ctx, a.EtcdSocket())
		if err != nil {
			return r, err
		}
		defer etcd.Close()
		got, err := measureScale(ctx, e, a, etcd, ns, n, throughputCfg.reads)
		if err != nil {
			return r, err
		}
		got.cpuProfile, got.heapProf = sr.cpuProfile, sr.heapProf
		r.scale = &got
	}
	return r, nil
}

// startFakeNodes registers fake nodes, each with its own connection; stop
// ends them.
func startFakeNodes(ctx context.Context, endpoint, prefix string, n int) (stop func(), err error) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var nodes []*fakenode.Node
	var conns []*client.Client
	stop = func() {
		// At once: a node's Stop waits out its loops' retry pauses
		// (100 ms), which one after another took over a minute for
		// 1,000 nodes, while the stopped ones went unresponsive.
		var wg sync.WaitGroup
		for _, fn := range nodes {
			wg.Go(fn.Stop)
		}
		wg.Wait()
		for _, c := range conns {
			c.Close()
		}
	}
	for i := range n {
		// Each node calls as itself, as a node agent does: held to a
		// node's permissions and its own stream limit, not sharing the
		// admin's (1,024 streams; each fake node holds three watches).
		name := fmt.Sprintf("%s-node-%02d", prefix, i)
		c, err := client.Dial(ctx, client.Config{Endpoint: endpoint, ActAsNode: name})
		if err != nil {
			stop()
			return nil, err
		}
		conns = append(conns, c)
		fn, err := fakenode.Start(ctx, c, fakenode.Options{Name: name,
			CPU: "1k", Memory: "4Ti", Logger: quiet})
		if err != nil {
			stop()
			return nil, err
		}
		nodes = append(nodes, fn)
	}
	return stop, nil
}

// measureThroughput creates n VMs as fast as workers callers can and
// waits until all run.
func measureThroughput(ctx context.Context, e *env, a *bench.Agent, ns string, n, workers int, memory string) (tpResult, error) {
	r := tpResult{n: n}
	c, tr, done, err := track(ctx, a, ns)
	if err != nil {
		return r, err
	}
	defer done()
	etcd, err := bench.DialEtcd(ctx, a.EtcdSocket())
	if err != nil {
		return r, err
	}
	defer etcd.Close()
	vms := make([]*apiv1.VirtualMachine, n)
	for i := range vms {
		vms[i] = bench.NoOSVM(ns, bench.VMName(i), memory)
	}
	before, err := bench.ReadStoreCounts(ctx, a, etcd)
	if err != nil {
		return r, err
	}
	cpu0, err := procfs.CPUSeconds(a.Pid())
	if err != nil {
		return r, err
	}
	self0, _ := procfs.CPUSeconds(os.Getpid())
	t0 := time.Now()
	if err := bench.CreateAll(ctx, c, vms, workers); err != nil {
		return r, err
	}
	r.created = time.Since(t0)
	if err := tr.WaitVMsRunning(ctx, n, 15*time.Minute, watchdog(e, "throughput "+ns)); err != nil {
		return r, err
	}
	r.vms = time.Since(t0)
	for _, vm := range vms {
		if at, ok := tr.VMIRunning(vm.GetMetadata().GetName()); ok {
			r.vmis = max(r.vmis, at.Sub(t0))
		}
	}
	cpu1, err := procfs.CPUSeconds(a.Pid())
	if err != nil {
		return r, err
	}
	self1, _ := procfs.CPUSeconds(os.Getpid())
	r.agentCPU, r.benchCPU = cpu1-cpu0, self1-self0
	st, err := procfs.ProcStatus(a.Pid(), "VmHWM", "VmRSS")
	if err != nil {
		return r, err
	}
	r.agentHWM, r.agentRSS = st["VmHWM"], st["VmRSS"]
	after, err := bench.ReadStoreCounts(ctx, a, etcd)
	if err != nil {
		return r, err
	}
	r.writes = bench.StoreCounts{Revision: after.Revision - before.Revision, Writes: after.Writes.Sub(before.Writes)}
	e.log.Info("throughput", "ns", ns, "n", n, "all_running", r.vms, "agent_cpu_s", r.agentCPU, "agent_hwm_kb", r.agentHWM)
	return r, nil
}
