package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/bench"
	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
)

// Targets of the issue, in KiB.
const (
	targetLauncherPrivate = 8 * 1024
	targetNonGuest        = 64 * 1024
)

var overheadCfg struct{ counts intList }

var overheadBench = &measurement{
	name: "overhead", id: "4-overhead", title: "4. Memory overhead per VM (booted test guests, TCG)",
	flags: func(fs *flag.FlagSet, full bool) func() string {
		overheadCfg.counts = byMode(full, intList{1, 10}, intList{1, 10, 50})
		fs.Var(&overheadCfg.counts, "counts", "VM counts, each measured with a fresh agent, comma-separated")
		return func() string { return "-counts " + overheadCfg.counts.String() }
	},
	run: runOverhead,
}

// ohResult is the memory of one count, per VM in KiB.
type ohResult struct {
	n                   int
	lRSS, lAnon, lPss   []int64 // launchers
	lPriv               []int64
	qRSS, qPss, touched []int64 // QEMU, guest RAM touched
	agent, daem         mem     // growth over all n VMs
	lMaps, qMaps        []procfs.Mapping
}

// perVM is the overhead of one result, per VM.
func (r ohResult) perVM() (virtplane, qemuLibvirt, totalPss, totalRSS int64) {
	n := int64(r.n)
	virtplane = mean(r.lPss) + r.agent.anon/n
	qemuLibvirt = mean(diff(r.qPss, r.touched)) + r.daem.anon/n
	totalRSS = mean(r.lRSS) + mean(diff(r.qRSS, r.touched)) + r.agent.rss/n + r.daem.rss/n
	return virtplane, qemuLibvirt, virtplane + qemuLibvirt, totalRSS
}

// daemons are libvirt's processes whose growth is shared among the VMs.
var daemons = []string{"libvirtd", "virtlogd"}

func runOverhead(ctx context.Context, e *env, s *bench.Section) error {
	s.Setup = []string{
		fmt.Sprintf("Per count: a fresh `serve --role all` agent on %s, then that many VMs of the test guest (%s, 1 vCPU, direct kernel boot, no disk) created at once; measured once every guest printed its boot marker on the console, plus 5 s.", e.uri, guestMemory),
		"Launcher: VmRSS and RssAnon (/proc/<pid>/status), Pss (/proc/<pid>/smaps_rollup: shared pages divided among the processes mapping them) and private memory (Private_Clean + Private_Dirty of smaps_rollup: pages no other process maps, what one more launcher costs the host). VmRSS counts the launcher binary and libvirt's libraries in full in every launcher, though the host holds them once.",
		"QEMU: guest RAM touched = Rss of its guest-RAM mapping (the smallest anonymous mapping at least the guest's size, /proc/<pid>/smaps; the method of internal/e2e/memory_test.go); QEMU non-guest = VmRSS (or Pss) minus that.",
		"Agent and libvirt daemons (libvirtd + virtlogd): growth of RssAnon (private memory they allocated) and of VmRSS from before the VMs were created (agent up, node registered) to the measurement, divided by the count. (Their Pss is no measure of growth: it falls as more QEMUs share their libraries.)",
		"Total non-guest per VM = virtplane's share (launcher Pss + agent RssAnon growth per VM) + QEMU and libvirt's share (QEMU non-guest Pss + daemon RssAnon growth per VM), the latter being what a raw libvirt domain costs as well. The RSS-based total (launcher VmRSS + QEMU non-guest VmRSS + agent and daemon VmRSS growth per VM) counts every shared page once per process: an upper bound.",
	}
	var results []ohResult
	for _, n := range overheadCfg.counts {
		r, err := overheadRun(ctx, e, n)
		if err != nil {
			return err
		}
		results = append(results, r)
	}
	s.NewTable("Per VM (MiB; mean [min–max] where per process)", "VMs", "Launcher VmRSS", "Launcher RssAnon", "Launcher Pss", "Launcher private", "QEMU VmRSS", "Guest RAM touched", "QEMU non-guest RSS", "QEMU non-guest Pss", "Agent growth / VM (RssAnon, VmRSS)", "libvirtd+virtlogd growth / VM (RssAnon, VmRSS)")
	for _, r := range results {
		n := int64(r.n)
		s.AddRow(strconv.Itoa(r.n), spread(r.lRSS), spread(r.lAnon), spread(r.lPss), spread(r.lPriv), spread(r.qRSS), spread(r.touched),
			spread(diff(r.qRSS, r.touched)), spread(diff(r.qPss, r.touched)),
			mib(r.agent.anon/n)+", "+mib(r.agent.rss/n), mib(r.daem.anon/n)+", "+mib(r.daem.rss/n))
	}
	s.NewTable("Non-guest memory per VM (MiB)", "VMs", "virtplane share (launcher Pss + agent growth)", "QEMU + libvirt share (also paid by raw libvirt)", "Total (Pss-based)", "Total (RSS-based upper bound)")
	for _, r := range results {
		v, q, t, rss := r.perVM()
		s.AddRow(strconv.Itoa(r.n), mib(v), mib(q), mib(t), mib(rss))
	}
	last := results[len(results)-1]
	s.Note("Where one launcher's VmRSS goes (at %d VMs, by backing object): %s.", last.n, mappings(last.lMaps, 6))
	s.Note("Where one QEMU's VmRSS goes (at %d VMs; [anon] includes the guest RAM touched and the 32 MiB TCG translation cache): %s.", last.n, mappings(last.qMaps, 6))
	pmax := maxOf(last.lPriv)
	s.Target(fmt.Sprintf("launcher private memory (largest Private_Clean + Private_Dirty at %d VMs)", last.n), "≤ 8 MiB", bench.MiB(pmax), pmax <= targetLauncherPrivate)
	_, _, total, _ := last.perVM()
	s.Target(fmt.Sprintf("total non-guest overhead per VM (Pss-based, %d VMs)", last.n), "≤ 64 MiB", bench.MiB(total), total <= targetNonGuest)
	if pmax > targetLauncherPrivate || total > targetNonGuest {
		s.Note("A memory target was missed; a CPU profile does not apply, and the mapping breakdowns above say where the resident memory is (file-backed pages of binaries and libraries are shared between processes: Pss divides them, VmRSS counts them in full).")
	}
	return nil
}

// mappings renders the n largest mappings as "name X MiB, ...".
func mappings(ms []procfs.Mapping, n int) string {
	var parts []string
	var rest int64
	for i, m := range ms {
		if i < n {
			parts = append(parts, fmt.Sprintf("%s %s MiB", filepath.Base(m.Name), mib(m.RssKiB)))
		} else {
			rest += m.RssKiB
		}
	}
	return strings.Join(append(parts, "everything else "+mib(rest)+" MiB"), ", ")
}

func overheadRun(ctx context.Context, e *env, n int) (ohResult, error) {
	r := ohResult{n: n}
	ns := fmt.Sprintf("%s-oh%d", e.prefix, n)
	a, err := e.startAgent(ctx, bench.AgentConfig{Dir: filepath.Join(e.work, "overhead-"+strconv.Itoa(n)), Role: bench.RoleAll,
		NodeName: ns, CPUAllocationRatio: cpuRatio(n)})
	if err != nil {
		return r, err
	}
	defer func() { _ = e.teardown(ns, a) }()
	c, tr, done, err := track(ctx, a, ns)
	if err != nil {
		return r, err
	}
	defer done()
	time.Sleep(2 * time.Second)
	agent0, err := memOf(a.Pid())
	if err != nil {
		return r, err
	}
	daem0 := daemonMem()

	vms := make([]*apiv1.VirtualMachine, n)
	for i := range vms {
		vms[i] = bench.GuestVM(ns, bench.VMName(i), guestMemory, e.kernel, e.initrd, testguest.Cmdline(testguest.Hostname("bench")))
	}
	if err := bench.CreateAll(ctx, c, vms, 4); err != nil {
		return r, err
	}
	if err := tr.WaitVMsRunning(ctx, n, 10*time.Minute, watchdog(e, "overhead")); err != nil {
		return r, err
	}
	domains := make([]string, n)
	for i := range vms {
		domains[i] = apiv1.DomainName(ns, bench.VMName(i))
	}
	if err := waitBooted(ctx, e, domains, 10*time.Minute); err != nil {
		return r, err
	}
	time.Sleep(5 * time.Second)

	q := resource.MustParse(guestMemory)
	guestKiB := q.Value() / 1024
	launchers := procfs.Launchers(e.launcher, ns)
	for _, d := range domains {
		lp, qp := launchers[d], procfs.QEMUPid(d)
		if lp == 0 || qp == 0 {
			return r, fmt.Errorf("%s: launcher pid %d, QEMU pid %d", d, lp, qp)
		}
		l, err := procfs.ProcStatus(lp, "VmRSS", "RssAnon")
		if err != nil {
			return r, err
		}
		lpss, err := procfs.Pss(lp)
		if err != nil {
			return r, err
		}
		lpriv, err := procfs.Private(lp)
		if err != nil {
			return r, err
		}
		r.lPriv = append(r.lPriv, lpriv)
		qs, err := procfs.ProcStatus(qp, "VmRSS")
		if err != nil {
			return r, err
		}
		qpss, err := procfs.Pss(qp)
		if err != nil {
			return r, err
		}
		_, touched, err := procfs.GuestRAM(qp, guestKiB)
		if err != nil {
			return r, err
		}
		r.lRSS, r.lAnon, r.lPss = append(r.lRSS, l["VmRSS"]), append(r.lAnon, l["RssAnon"]), append(r.lPss, lpss)
		r.qRSS, r.qPss, r.touched = append(r.qRSS, qs["VmRSS"]), append(r.qPss, qpss), append(r.touched, touched)
	}
	agent1, err := memOf(a.Pid())
	if err != nil {
		return r, err
	}
	daem1 := daemonMem()
	r.agent = mem{rss: agent1.rss - agent0.rss, anon: agent1.anon - agent0.anon}
	r.daem = mem{rss: daem1.rss - daem0.rss, anon: daem1.anon - daem0.anon}
	if r.lMaps, err = procfs.RssByMapping(launchers[domains[0]]); err != nil {
		return r, err
	}
	if r.qMaps, err = procfs.RssByMapping(procfs.QEMUPid(domains[0])); err != nil {
		return r, err
	}
	e.log.Info("overhead", "n", n, "launcher_rss_kb", mean(r.lRSS), "qemu_rss_kb", mean(r.qRSS), "touched_kb", mean(r.touched))
	return r, nil
}

// waitBooted waits until every domain's console log shows the test
// guest's boot marker.
func waitBooted(ctx context.Context, e *env, domains []string, timeout time.Duration) error {
	logs := map[string]string{}
	for _, d := range domains {
		p, err := e.lv.SerialLogPath(d)
		if err != nil {
			return err
		}
		if p == "" {
			return fmt.Errorf("%s has no console log", d)
		}
		logs[d] = p
	}
	return waitUntil(ctx, timeout, "every guest booted", func() bool {
		for d, p := range logs {
			b, err := os.ReadFile(p)
			if err != nil {
				return false
			}
			if _, ok := testguest.FindMarker(string(b), testguest.MarkerBooted); !ok {
				return false
			}
			delete(logs, d)
		}
		return true
	})
}

type mem struct{ rss, anon int64 }

func memOf(pid int) (mem, error) {
	st, err := procfs.ProcStatus(pid, "VmRSS", "RssAnon")
	if err != nil {
		return mem{}, err
	}
	return mem{rss: st["VmRSS"], anon: st["RssAnon"]}, nil
}

// daemonMem sums the memory of libvirt's daemons; one that exits
// meanwhile counts nothing.
func daemonMem() mem {
	var m mem
	for _, name := range daemons {
		for _, pid := range procfs.PidsByComm(name) {
			if x, err := memOf(pid); err == nil {
				m.rss, m.anon = m.rss+x.rss, m.anon+x.anon
			}
		}
	}
	return m
}
