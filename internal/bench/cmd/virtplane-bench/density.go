package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/bench"
	"github.com/virtplane/terraform-provider-virtplane/internal/bench/virt"
)

// The density shape: KubeVirt CI's small no-OS guest.
const (
	densityMemory = "64Mi"
	// densityOverhead is set on purpose: the default 160Mi would place
	// 100 such VMs (100 × 224Mi = 21.9 GiB) only just inside this host's
	// allocatable memory; 128Mi is above the non-guest memory section 4
	// measures for a VM.
	densityOverhead = "128Mi"
)

var densityCfg struct {
	n        int
	interval time.Duration
	workers  int // --node-workers; 0 keeps the agent's default
}

var densityBench = &measurement{
	name: "density", id: "2-density", title: "2. Density: N VMs created 100 ms apart (KubeVirt CI shape)",
	flags: func(fs *flag.FlagSet, full bool) func() string {
		fs.IntVar(&densityCfg.n, "n", byMode(full, 20, 100), "VMs")
		fs.DurationVar(&densityCfg.interval, "interval", 100*time.Millisecond, "between creates")
		fs.IntVar(&densityCfg.workers, "node-workers", 0, "the agent's --node-workers (0: its default)")
		return func() string {
			cmd := fmt.Sprintf("-n %d -interval %s", densityCfg.n, densityCfg.interval)
			if densityCfg.workers > 0 {
				cmd += fmt.Sprintf(" -node-workers %d", densityCfg.workers)
			}
			return cmd
		}
	},
	run: runDensity,
}

// cpuRatio is a --cpu-allocation-ratio that places n one-vCPU VMs on this
// host: at least 100, the default 10 placing only 20 on two cores.
func cpuRatio(n int) int { return max(100, (n+runtime.NumCPU()-1)/runtime.NumCPU()) }

func runDensity(ctx context.Context, e *env, s *bench.Section) error {
	n, interval := densityCfg.n, densityCfg.interval
	ns := e.prefix + "-density"
	dir := filepath.Join(e.work, "density")
	ratio := cpuRatio(n)
	s.Setup = []string{
		fmt.Sprintf("%d VMs of %s guest memory, 1 vCPU, no disk, no kernel, no NIC (SeaBIOS finds nothing to boot and idles), run strategy Always, one create every %s, each create in its own goroutine.", n, densityMemory, interval),
		fmt.Sprintf("virtplane: one agent, `serve --role all --vm-memory-overhead %s --cpu-allocation-ratio %d` on %s. The overhead is set deliberately: %d × (%s + %s) must fit the node's allocatable memory (host memory − 512Mi reserved); the default 160Mi would leave under 1 GiB of it at 100 VMs. The ratio lets %d one-vCPU VMs be placed on %d cores (the default 10 places 20).",
			densityOverhead, ratio, e.uri, n, densityMemory, densityOverhead, n, runtime.NumCPU()),
		"virtplane latency: from the Create call to the VMI's phase Running (and to the VM's Running + ready) as seen by an API watch.",
		"Raw libvirt, same run, after the virtplane VMs are gone: the same domain XML (one virtplane domain's inactive XML, renamed, UUID and metadata dropped), one libvirt connection per domain opened beforehand (as each launcher has its own), `virDomainDefineXML` + `virDomainCreate` started on the same 100 ms schedule; latency from the scheduled moment to Create's return.",
		"Reference from the issue: raw libvirt, 100 domains at 100 ms on this host, p50 7.6 s, p95 12.3 s.",
	}
	a, err := e.startAgent(ctx, bench.AgentConfig{Dir: filepath.Join(dir, "agent"), Role: bench.RoleAll, NodeName: ns,
		MemoryOverhead: densityOverhead, CPUAllocationRatio: ratio, Extra: densityExtra()})
	if err != nil {
		return err
	}
	defer func() { _ = e.teardown(ns, a) }()
	vp, err := densityVirtplane(ctx, e, a, ns, n, interval)
	if err != nil {
		return err
	}
	if err := e.teardown(ns, a); err != nil {
		return err
	}
	// Let libvirtd and the host settle after n QEMUs came and went.
	time.Sleep(3 * time.Second)
	raw, err := densityRaw(ctx, e, filepath.Join(dir, "raw"), ns+"-raw", vp.xml, n, interval)
	if err != nil {
		return err
	}
	s.NewTable(fmt.Sprintf("Create → Running, %d VMs, one every %s (percentiles by nearest rank)", n, interval), "Path", "P50", "P95", "Max", "n")
	row := func(what string, ds []time.Duration) {
		s.AddRow(what, bench.Secs(bench.Percentile(ds, 50)), bench.Secs(bench.Percentile(ds, 95)), bench.Secs(bench.MaxDuration(ds)), fmt.Sprint(len(ds)))
	}
	row("virtplane: create → VMI Running", vp.vmi)
	row("virtplane: create → VM Running and ready", vp.vm)
	row("raw libvirt: scheduled → define + start returned", raw)
	s.NewTable("virtplane (VMI Running) against raw libvirt, same run", "Percentile", "virtplane", "raw", "Difference", "Ratio")
	for _, p := range []float64{50, 95} {
		v, r := bench.Percentile(vp.vmi, p), bench.Percentile(raw, p)
		s.AddRow(fmt.Sprintf("P%.0f", p), bench.Secs(v), bench.Secs(r), bench.Secs(v-r), bench.Ratio(v, r))
	}
	s.Note("virtplane: all %d VMs Running and ready %s after the first create (the last create was issued at %s).", n, bench.Secs(vp.all), bench.Secs(time.Duration(n-1)*interval))
	startBreakdown(s, ns, a.Log, vp.timeline, true)
	storeTable(s, vp.before, vp.after, n)
	return nil
}

// densityResult is the virtplane half of the density run.
type densityResult struct {
	vmi, vm       []time.Duration
	timeline      []vpStart
	all           time.Duration
	before, after bench.StoreCounts
	xml           string // inactive XML of the first VM's domain
}

// densityVirtplane creates the VMs through the API on the schedule and
// waits until all run.
func densityVirtplane(ctx context.Context, e *env, a *bench.Agent, ns string, n int, interval time.Duration) (*densityResult, error) {
	c, tr, done, err := track(ctx, a, ns)
	if err != nil {
		return nil, err
	}
	defer done()
	etcd, err := bench.DialEtcd(ctx, a.EtcdSocket())
	if err != nil {
		return nil, err
	}
	defer etcd.Close()
	r := &densityResult{}
	if r.before, err = bench.ReadStoreCounts(ctx, a, etcd); err != nil {
		return nil, err
	}
	vms := make([]*apiv1.VirtualMachine, n)
	for i := range vms {
		vms[i] = bench.NoOSVM(ns, bench.VMName(i), densityMemory)
	}
	t0 := time.Now()
	issued, err := bench.CreatePaced(ctx, c, vms, interval)
	if err != nil {
		return nil, err
	}
	if err := tr.WaitVMsRunning(ctx, n, 10*time.Minute, watchdog(e, "density")); err != nil {
		return nil, err
	}
	r.all = time.Since(t0)
	// Trailing writes (conditions) settle before the count.
	time.Sleep(2 * time.Second)
	if r.after, err = bench.ReadStoreCounts(ctx, a, etcd); err != nil {
		return nil, err
	}
	for _, vm := range vms {
		name := vm.GetMetadata().GetName()
		t1, _ := tr.VMIRunning(name)
		t2, _ := tr.VMRunning(name)
		r.vmi, r.vm = append(r.vmi, t1.Sub(issued[name])), append(r.vm, t2.Sub(issued[name]))
		r.timeline = append(r.timeline, vpStart{name: name, created: issued[name], sched: bench.PhaseTime(tr.VMI(name), apiv1.PhaseScheduled), vmiRun: t1, vmRun: t2})
	}
	e.log.Info("virtplane density", "n", n, "p50", bench.Percentile(r.vmi, 50), "p95", bench.Percentile(r.vmi, 95))
	r.xml, err = e.lv.InactiveXML(apiv1.DomainName(ns, bench.VMName(0)))
	return r, err
}

// storeTable reports store writes per VM, from the agent's write counters
// and from the etcd revision.
func storeTable(s *bench.Section, before, after bench.StoreCounts, n int) {
	w := after.Writes.Sub(before.Writes)
	per := func(v float64) string { return fmt.Sprintf("%.2f", v/float64(n)) }
	s.NewTable("Store writes per VM", "Counter", "Per VM", "Total")
	s.AddRow("VM + VMI writes (virtplane_store_writes_total, kinds VirtualMachine and VirtualMachineInstance)", per(w.VMAndVMI()), fmt.Sprintf("%.0f", w.VMAndVMI()))
	s.AddRow("  of which VirtualMachine", per(w["VirtualMachine"]), fmt.Sprintf("%.0f", w["VirtualMachine"]))
	s.AddRow("  of which VirtualMachineInstance", per(w["VirtualMachineInstance"]), fmt.Sprintf("%.0f", w["VirtualMachineInstance"]))
	s.AddRow("Node writes (heartbeats) meanwhile", per(w["Node"]), fmt.Sprintf("%.0f", w["Node"]))
	rev := after.Revision - before.Revision
	s.AddRow("etcd revision delta (every write transaction, heartbeats included)", per(float64(rev)), fmt.Sprint(rev))
}

// densityRaw starts n copies of xml on the same schedule, each on a
// connection of its own, and returns scheduled → started latencies.
func densityRaw(ctx context.Context, e *env, dir, prefix, xml string, n int, interval time.Duration) ([]time.Duration, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	conns := make([]libvirtConn, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Close()
			}
		}
	}()
	xmls := make([]string, n)
	for i := range n {
		var err error
		name := fmt.Sprintf("%s-%05d", prefix, i)
		if xmls[i], err = virt.Clone(xml, name, filepath.Join(dir, name+".log")); err != nil {
			return nil, err
		}
		if conns[i], err = openLibvirt(e.uri); err != nil {
			return nil, err
		}
	}
	defer func() { _, _ = e.lv.RemoveAll(prefix) }()
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range n {
		at := t0.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(at))
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = conns[i].DefineAndStart(xmls[i])
			lat[i] = time.Since(at)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	e.log.Info("raw density", "n", n, "p50", bench.Percentile(lat, 50), "p95", bench.Percentile(lat, 95))
	return lat, ctx.Err()
}

func densityExtra() []string {
	if densityCfg.workers <= 0 {
		return nil
	}
	return []string{"--node-workers", fmt.Sprint(densityCfg.workers)}
}
