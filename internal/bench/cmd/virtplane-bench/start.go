package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/bench"
	"github.com/virtplane/terraform-provider-virtplane/internal/bench/virt"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
)

// guestMemory is the test guest's memory, as in internal/e2e.
const guestMemory = "160Mi"

var startCfg struct{ n, tf int }

var startBench = &measurement{
	name: "start", id: "1-start", title: "1. Start latency: virtplane against the raw libvirt floor",
	flags: func(fs *flag.FlagSet, full bool) func() string {
		fs.IntVar(&startCfg.n, "n", byMode(full, 5, 20), "starts of each path, alternating")
		fs.IntVar(&startCfg.tf, "tf-n", byMode(full, 3, 10), "terraform applies (and raw starts alternating with them); 0 skips terraform")
		return func() string { return fmt.Sprintf("-n %d -tf-n %d", startCfg.n, startCfg.tf) }
	},
	run: runStart,
}

// starter starts one VM at a time through virtplane or raw libvirt, on one
// agent, and removes it again.
type starter struct {
	e    *env
	ns   string
	dir  string
	c    *client.Client
	tr   *bench.Tracker
	raw  string // domain XML the raw starts clone
	nRaw int
}

func (st *starter) vm(name string) *apiv1.VirtualMachine {
	return bench.GuestVM(st.ns, name, guestMemory, st.e.kernel, st.e.initrd, testguest.Cmdline(testguest.Hostname("bench")))
}

// vpStart is the timeline of one virtplane start.
type vpStart struct {
	name                          string
	created, sched, vmiRun, vmRun time.Time
}

func (v vpStart) vmi() time.Duration { return v.vmiRun.Sub(v.created) }
func (v vpStart) vm() time.Duration  { return v.vmRun.Sub(v.created) }

// startVirtplane creates VM name and waits until its VMI and the VM are
// Running.
func (st *starter) startVirtplane(ctx context.Context, name string) (vpStart, error) {
	st.tr.Forget(name)
	v := vpStart{name: name, created: time.Now()}
	if _, err := st.c.VMs.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: st.vm(name)}); err != nil {
		return v, fmt.Errorf("creating %s: %w", name, err)
	}
	if err := waitUntil(ctx, 2*time.Minute, name+" Running", func() bool {
		_, a := st.tr.VMIRunning(name)
		_, b := st.tr.VMRunning(name)
		return a && b
	}); err != nil {
		return v, err
	}
	v.vmiRun, _ = st.tr.VMIRunning(name)
	v.vmRun, _ = st.tr.VMRunning(name)
	v.sched = bench.PhaseTime(st.tr.VMI(name), apiv1.PhaseScheduled)
	return v, nil
}

// stopVirtplane deletes VM name and waits until it and its domain are gone.
func (st *starter) stopVirtplane(ctx context.Context, name string) error {
	key := &apiv1.ObjectKey{Namespace: st.ns, Name: name}
	if _, err := st.c.VMs.Delete(ctx, &apiv1.DeleteVirtualMachineRequest{Key: key}); err != nil {
		return fmt.Errorf("deleting %s: %w", name, err)
	}
	dom := apiv1.DomainName(st.ns, name)
	return waitUntil(ctx, 2*time.Minute, name+" deleted", func() bool {
		_, err := st.c.VMs.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: key})
		if status.Code(err) != codes.NotFound {
			return false
		}
		names, err := st.e.lv.Names(dom)
		return err == nil && len(names) == 0
	})
}

// startRaw defines and starts a copy of the virtplane domain directly,
// then removes it; it returns define + start.
func (st *starter) startRaw() (time.Duration, error) {
	st.nRaw++
	name := fmt.Sprintf("%s-raw-%03d", st.ns, st.nRaw)
	x, err := virt.Clone(st.raw, name, filepath.Join(st.dir, "raw", name+".log"))
	if err != nil {
		return 0, err
	}
	def, start, err := st.e.lv.DefineAndStart(x)
	if rerr := st.e.lv.Remove(name); err == nil && rerr != nil {
		return 0, rerr
	}
	return def + start, err
}

func runStart(ctx context.Context, e *env, s *bench.Section) error {
	ns := e.prefix + "-start"
	dir := filepath.Join(e.work, "start")
	if err := os.MkdirAll(filepath.Join(dir, "raw"), 0o755); err != nil {
		return err
	}
	a, err := e.startAgent(ctx, bench.AgentConfig{Dir: filepath.Join(dir, "agent"), Role: bench.RoleAll, NodeName: ns})
	if err != nil {
		return err
	}
	defer func() { _ = e.teardown(ns, a) }()
	c, tr, done, err := track(ctx, a, ns)
	if err != nil {
		return err
	}
	defer done()
	st := &starter{e: e, ns: ns, dir: dir, c: c, tr: tr}

	s.Setup = []string{
		"One agent, `serve --role all` (API, embedded etcd, controllers and node agent in one process), on " + e.uri + "; defaults otherwise.",
		fmt.Sprintf("VM: the test guest (direct kernel boot of %s + %s), %s, 1 vCPU, no disk, no NIC. \"Running\" is the domain started, not the guest booted.", e.kernel, e.initrd, guestMemory),
		"virtplane: the API Create call is issued → the VMI's phase Running (node agent's write) and the VM's printable status Running + ready (the write that ends a start), both as seen by a watch on the API.",
		"Raw floor: the same domain (`virsh dumpxml --inactive` of the virtplane domain, through the libvirt API), renamed, UUID and metadata dropped, console log path changed; `virDomainDefineXML` + `virDomainCreate` over an open connection, timed until Create returns (QEMU started, vCPUs running).",
		"Each VM is deleted, and its domain gone, before the next start; the paths alternate; one warm-up start of each path is not counted.",
	}

	// Warm-up: one start of each path; the virtplane domain gives the XML.
	if _, err := st.startVirtplane(ctx, "warmup"); err != nil {
		return err
	}
	if st.raw, err = e.lv.InactiveXML(apiv1.DomainName(ns, "warmup")); err != nil {
		return err
	}
	if err := st.stopVirtplane(ctx, "warmup"); err != nil {
		return err
	}
	if _, err := st.startRaw(); err != nil {
		return fmt.Errorf("raw start of the virtplane domain XML: %w", err)
	}

	var vps []vpStart
	var raw []time.Duration
	for i := range startCfg.n {
		name := bench.VMName(i)
		v, err := st.startVirtplane(ctx, name)
		if err != nil {
			return err
		}
		if err := st.stopVirtplane(ctx, name); err != nil {
			return err
		}
		r, err := st.startRaw()
		if err != nil {
			return err
		}
		vps, raw = append(vps, v), append(raw, r)
		e.log.Info("start", "i", i, "virtplane_vmi_running", v.vmi(), "virtplane_vm_running", v.vm(), "raw", r)
	}
	var vmi, vm []time.Duration
	for _, v := range vps {
		vmi, vm = append(vmi, v.vmi()), append(vm, v.vm())
	}
	s.NewTable("Start latency (same domain XML, alternating)", "Path", "Median", "Min", "Max", "n")
	row := func(what string, ds []time.Duration) {
		s.AddRow(what, bench.Secs(bench.Median(ds)), bench.Secs(bench.MinDuration(ds)), bench.Secs(bench.MaxDuration(ds)), fmt.Sprint(len(ds)))
	}
	row("virtplane: API create → VMI Running", vmi)
	row("virtplane: API create → VM Running and ready", vm)
	row("raw libvirt: define + start", raw)
	s.NewTable("virtplane against the floor (medians)", "Comparison", "Difference", "Ratio")
	s.AddRow("VMI Running vs raw define+start", bench.Secs(bench.Median(vmi)-bench.Median(raw)), bench.Ratio(bench.Median(vmi), bench.Median(raw)))
	s.AddRow("VM Running and ready vs raw define+start", bench.Secs(bench.Median(vm)-bench.Median(raw)), bench.Ratio(bench.Median(vm), bench.Median(raw)))
	startBreakdown(s, ns, a.Log, vps, false)

	if startCfg.tf > 0 {
		if err := startTerraform(ctx, st, a, s); err != nil {
			return err
		}
	}
	return nil
}

// startBreakdown splits virtplane starts at the VMI's Scheduled timestamp
// and at the node agent's log lines "launched launcher" (the launcher
// process answers) and "domain synced" (its Sync defined and started the
// domain); with overlap it also reports how many VMIs were between those
// two lines at once at most.
func startBreakdown(s *bench.Section, ns, agentLog string, vps []vpStart, overlap bool) {
	launched, synced := map[string]time.Time{}, map[string]time.Time{}
	for _, r := range bench.Matching(agentLog, "launched launcher") {
		launched[r.Str("vmi")] = r.Time
	}
	for _, r := range bench.Matching(agentLog, "domain synced") {
		synced[r.Str("vmi")] = r.Time
	}
	var sched, queue, sync, report []time.Duration
	type edge struct {
		at time.Time
		d  int
	}
	var edges []edge
	for _, v := range vps {
		l, ok1 := launched[ns+"/"+v.name]
		y, ok2 := synced[ns+"/"+v.name]
		if v.sched.IsZero() || !ok1 || !ok2 {
			continue
		}
		sched = append(sched, v.sched.Sub(v.created))
		queue = append(queue, l.Sub(v.sched))
		sync = append(sync, y.Sub(l))
		report = append(report, v.vmiRun.Sub(y))
		edges = append(edges, edge{l, 1}, edge{y, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int { return a.at.Compare(b.at) })
	inFlight, most := 0, 0
	for _, e := range edges {
		inFlight += e.d
		most = max(most, inFlight)
	}
	s.NewTable("Where a virtplane start goes (agent timestamps: the VMI's phase transitions and the node agent's log)", "Step", "P50", "P95", "n")
	for _, r := range []struct {
		what string
		ds   []time.Duration
	}{
		{"API create → VMI Scheduled (API, VM controller, VMI placement)", sched},
		{"Scheduled → launcher started (node agent: watch, work queue, per-VMI dir, fork/exec, go-plugin handshake)", queue},
		{"launcher started → domain synced (launcher connects to libvirt, defines and starts the domain)", sync},
		{"domain synced → VMI Running seen by the client (status write, watch)", report},
	} {
		s.AddRow(r.what, bench.Secs(bench.Percentile(r.ds, 50)), bench.Secs(bench.Percentile(r.ds, 95)), fmt.Sprint(len(r.ds)))
	}
	if overlap {
		s.Note("The node agent had at most %d VMIs between `launched launcher` and `domain synced` at a time (the agent's --node-workers, default twice the CPUs and at least 4).", most)
	}
}
