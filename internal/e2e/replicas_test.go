package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// Issue 19's acceptance on real guests: VirtualMachinePool here,
// VirtualMachineInstanceReplicaSet in replicaset_test.go.

// sampler calls pass every interval, from start until halt, and counts
// the passes that worked and those that failed (the API may be away: a
// server killed on purpose).
type sampler struct {
	stop context.CancelFunc
	done chan struct{}

	mu           sync.Mutex
	passes, errs int
	lastErr      error
}

func (c *mnCluster) sample(every time.Duration, pass func(ctx context.Context) error) *sampler {
	ctx, cancel := context.WithCancel(c.ctx)
	s := &sampler{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			err := pass(ctx)
			if ctx.Err() != nil {
				return
			}
			s.mu.Lock()
			if err != nil {
				s.errs++
				s.lastErr = err
			} else {
				s.passes++
			}
			s.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	c.t.Cleanup(func() { s.halt() })
	return s
}

// halt stops the sampler and returns how many passes worked and failed.
func (s *sampler) halt() (passes, errs int) {
	s.stop()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.passes, s.errs
}

// guestPool is a pool of the test guest (RunStrategy Always) with one
// 16 MiB persistent volume per VM, vda, on which the guest keeps its boot
// counter (testguest.Persist); it selects app=<name>.
func (c *mnCluster) guestPool(name string, replicas int32, cmdline string) *apiv1.VirtualMachinePool {
	labels := map[string]string{"app": name}
	vm := withDisks(guestVM(c.ns, "", apiv1.RunStrategyAlways, c.nodes[0].Kernel, cmdline),
		[]*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}},
		[]*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "16Mi"}}})
	vm.Spec.Template.Metadata = &apiv1.ObjectMeta{Labels: labels}
	return &apiv1.VirtualMachinePool{
		Metadata: &apiv1.ObjectMeta{Namespace: c.ns, Name: name},
		Spec: &apiv1.VirtualMachinePoolSpec{
			Replicas: proto.Int32(replicas),
			Selector: &apiv1.LabelSelector{MatchLabels: labels},
			VirtualMachineTemplate: &apiv1.VirtualMachineTemplateSpec{
				Metadata: &apiv1.ObjectMeta{Labels: labels},
				Spec:     vm.Spec,
			},
		},
	}
}

func (c *mnCluster) pool(name string) *apiv1.VirtualMachinePool {
	c.t.Helper()
	p, err := c.api.Pools.Get(c.ctx, &apiv1.GetPoolRequest{Key: c.key(name)})
	if err != nil {
		c.t.Fatalf("getting pool %s: %v", name, err)
	}
	return p
}

// vmNames lists the names of the namespace's VMs, sorted.
func (c *mnCluster) vmNames() []string {
	c.t.Helper()
	list, err := c.api.VMs.List(c.ctx, &apiv1.ListVirtualMachinesRequest{Options: &apiv1.ListOptions{Namespace: c.ns}})
	if err != nil {
		c.t.Fatal(err)
	}
	var names []string
	for _, vm := range list.GetItems() {
		names = append(names, vm.GetMetadata().GetName())
	}
	slices.Sort(names)
	return names
}

// poolVM is what the test knows of one pool VM's current instance.
type poolVM struct {
	name    string
	vmUID   string
	vmiUID  string
	qemu    int
	volume  string // its persistent volume's file on the node
	con     *console
	counter int // the boot counter this instance wrote
}

// waitPoolVM waits until VM name runs an instance other than notUID whose
// guest has bumped the boot counter, and returns it.
func (c *mnCluster) waitPoolVM(n *mnNode, name, notUID string) *poolVM {
	c.t.Helper()
	var vmi *apiv1.VirtualMachineInstance
	testutil.Eventually(c.t, bootTimeout, name+" running a new instance", func() bool {
		vmi = c.vmi(name)
		return vmi != nil && vmi.GetMetadata().GetUid() != notUID && vmi.GetStatus().GetPhase() == apiv1.PhaseRunning
	})
	vm := c.vm(name)
	dir, err := nodedir.Layout{Root: n.NodeDir}.VMDir(vm.GetMetadata().GetUid())
	if err != nil {
		c.t.Fatal(err)
	}
	p := &poolVM{name: name, vmUID: vm.GetMetadata().GetUid(), vmiUID: vmi.GetMetadata().GetUid(),
		volume: filepath.Join(nodedir.VolumesDir(dir), "data.qcow2"), con: n.console(c.t, vmi.GetMetadata().GetUid())}
	wrote := testguest.Fields(p.con.waitMarker(testguest.MarkerPersistWrote, bootTimeout))
	if _, err := fmt.Sscan(wrote["boot"], &p.counter); err != nil {
		c.t.Fatalf("%s wrote %v: %v", name, wrote, err)
	}
	p.qemu = c.waitQEMUPid(n, name)
	if _, err := os.Stat(p.volume); err != nil {
		c.t.Fatalf("%s's persistent volume: %v", name, err)
	}
	return p
}

// waitPoolVMs waits for the given VMs of a pool to run (their guests boot
// at once; the waits are one after the other) and returns them by name.
func (c *mnCluster) waitPoolVMs(n *mnNode, names ...string) map[string]*poolVM {
	c.t.Helper()
	out := map[string]*poolVM{}
	for _, name := range names {
		out[name] = c.waitPoolVM(n, name, "")
	}
	return out
}

// scalePool sets the pool's replicas and waits until exactly the VMs
// named are left and the status counts them all ready.
func (c *mnCluster) scalePool(name string, replicas int32, want ...string) {
	c.t.Helper()
	if _, err := c.api.Pools.Scale(c.ctx, &apiv1.ScaleRequest{Key: c.key(name), Replicas: replicas}); err != nil {
		c.t.Fatal(err)
	}
	testutil.EventuallyNoError(c.t, bootTimeout, fmt.Sprintf("pool %s at %v", name, want), func() error {
		if got := c.vmNames(); !slices.Equal(got, want) {
			return fmt.Errorf("VMs %v", got)
		}
		st := c.pool(name).GetStatus()
		if st.GetReplicas() != replicas || st.GetReadyReplicas() != replicas {
			return fmt.Errorf("status %v", st)
		}
		return nil
	})
}

// rolloutSampler watches a rollout through the API: in each pass, how
// many of the pool's VMs are not Ready (the VM's condition, which
// status.ready_replicas counts) and how many have no instance Running
// and Ready (what the pool controller counts as unavailable), and every
// instance uid each VM had.
type rolloutSampler struct {
	*sampler
	mu                   sync.Mutex
	maxNotReady, maxDown int
	firstDown, lastDown  time.Time
	uids                 map[string][]string // VM name → instance uids in the order seen
	notReadyAt, downAt   []string            // passes over the limit
	limit                int
	vmsWanted            []string
}

func (c *mnCluster) sampleRollout(limit int, vms ...string) *rolloutSampler {
	r := &rolloutSampler{limit: limit, vmsWanted: vms, uids: map[string][]string{}}
	r.sampler = c.sample(100*time.Millisecond, func(ctx context.Context) error {
		vmList, err := c.api.VMs.List(ctx, &apiv1.ListVirtualMachinesRequest{Options: &apiv1.ListOptions{Namespace: c.ns}})
		if err != nil {
			return err
		}
		vmiList, err := c.api.VMIs.List(ctx, &apiv1.ListVirtualMachineInstancesRequest{Options: &apiv1.ListOptions{Namespace: c.ns}})
		if err != nil {
			return err
		}
		r.pass(vmList.GetItems(), vmiList.GetItems())
		return nil
	})
	return r
}

func (r *rolloutSampler) pass(vms []*apiv1.VirtualMachine, vmis []*apiv1.VirtualMachineInstance) {
	now := time.Now()
	ready := map[string]bool{}
	for _, vm := range vms {
		ready[vm.GetMetadata().GetName()] = apiv1.IsConditionTrue(vm.GetStatus().GetConditions(), apiv1.ConditionReady)
	}
	up := map[string]bool{}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, v := range vmis {
		name, uid := v.GetMetadata().GetName(), v.GetMetadata().GetUid()
		if !slices.Contains(r.uids[name], uid) {
			r.uids[name] = append(r.uids[name], uid)
		}
		up[name] = v.GetMetadata().GetDeletionTimestamp() == nil && v.GetStatus().GetPhase() == apiv1.PhaseRunning &&
			apiv1.IsConditionTrue(v.GetStatus().GetConditions(), apiv1.ConditionReady)
	}
	notReady, down := 0, 0
	for _, name := range r.vmsWanted {
		if !ready[name] {
			notReady++
		}
		if !up[name] {
			down++
		}
	}
	stamp := now.Format("15:04:05.000")
	if notReady > r.limit {
		r.notReadyAt = append(r.notReadyAt, fmt.Sprintf("%s: %d VMs not Ready %v", stamp, notReady, ready))
	}
	if down > r.limit {
		r.downAt = append(r.downAt, fmt.Sprintf("%s: %d VMs without a ready instance %v", stamp, down, up))
	}
	if down > 0 {
		if r.firstDown.IsZero() {
			r.firstDown = now
		}
		r.lastDown = now
	}
	r.maxNotReady, r.maxDown = max(r.maxNotReady, notReady), max(r.maxDown, down)
}

// TestPoolScaleVolumesAndRollingUpdate is issue 19's pool acceptance on
// one real node: a pool of 3 guests, each with a persistent volume that
// holds its boot counter, scaled to 5 and then to 2 (the highest
// ordinals go, with their volumes; -0 and -1 keep their QEMU); a QEMU
// SIGKILLed comes back as the same VM on the same volume (counter 2);
// a template change rolls through one VM at a time, each VM restarted
// exactly once on its volume (counter up by one).
func TestPoolScaleVolumesAndRollingUpdate(t *testing.T) {
	c := newMultiNodeCluster(t, mnOptions{nodes: 1})
	t.Cleanup(c.dumpOnFailure)
	n := c.nodes[0]
	cmdline := testguest.Cmdline(testguest.Persist("/dev/vda"))

	// 1. Three VMs, each on a new volume.
	began := time.Now()
	p := c.guestPool("db", 3, cmdline)
	p.Spec.MaxUnavailable = "1"
	if _, err := c.api.Pools.Create(c.ctx, &apiv1.CreatePoolRequest{Pool: p}); err != nil {
		t.Fatal(err)
	}
	vms := c.waitPoolVMs(n, "db-0", "db-1", "db-2")
	report(t, "pool of 3: created to 3 guests booted on their volumes in %s", time.Since(began).Round(time.Millisecond))
	c.scalePool("db", 3, "db-0", "db-1", "db-2")
	for name, v := range vms {
		if v.counter != 1 {
			t.Errorf("%s's first boot wrote boot counter %d, want 1", name, v.counter)
		}
	}

	// 2. Scale out to 5: -3 and -4, each with a new volume.
	scaled := time.Now()
	if _, err := c.api.Pools.Scale(c.ctx, &apiv1.ScaleRequest{Key: c.key("db"), Replicas: 5}); err != nil {
		t.Fatal(err)
	}
	for name, v := range c.waitPoolVMs(n, "db-3", "db-4") {
		if v.counter != 1 {
			t.Errorf("%s's first boot wrote boot counter %d, want 1", name, v.counter)
		}
		vms[name] = v
	}
	c.scalePool("db", 5, "db-0", "db-1", "db-2", "db-3", "db-4")
	report(t, "pool scaled 3 → 5: two more guests booted in %s", time.Since(scaled).Round(time.Millisecond))

	// 3. Scale in to 2: -4, -3 and -2 go, with their volumes.
	scaled = time.Now()
	c.scalePool("db", 2, "db-0", "db-1")
	vmsGone := time.Since(scaled)
	for _, name := range []string{"db-2", "db-3", "db-4"} {
		dir := filepath.Dir(filepath.Dir(vms[name].volume))
		testutil.Eventually(t, stateTimeout, name+"'s VM directory and volume removed", func() bool {
			_, err := os.Stat(dir)
			return os.IsNotExist(err)
		})
		if pid := n.QEMUPid(c.domain(name)); pid != 0 {
			t.Errorf("%s's QEMU %d still runs", name, pid)
		}
	}
	report(t, "pool scaled 5 → 2: VMs -4, -3, -2 gone in %s, their volumes removed in %s",
		vmsGone.Round(time.Millisecond), time.Since(scaled).Round(time.Millisecond))
	for _, name := range []string{"db-0", "db-1"} {
		c.samePoolVM(n, vms[name], "after the scale-in")
	}

	// 4. QEMU of -1 killed: the same VM restarts on the same volume.
	old := vms["db-1"]
	killed := time.Now()
	if err := syscall.Kill(old.qemu, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	back := c.waitPoolVM(n, "db-1", old.vmiUID)
	report(t, "QEMU of db-1 SIGKILLed: new instance booted on its volume in %s, boot counter %d",
		time.Since(killed).Round(time.Millisecond), back.counter)
	if back.vmUID != old.vmUID || back.volume != old.volume {
		t.Errorf("db-1 after the kill: VM %s volume %s; want the same VM %s and volume %s", back.vmUID, back.volume, old.vmUID, old.volume)
	}
	if prev := back.con.waitMarker(testguest.MarkerPersistPrevious, stateTimeout); prev != "VIRTPLANE-PERSIST boot=1" {
		t.Errorf("db-1's restart found %q on its volume, want the first boot's mark", prev)
	}
	if back.counter != 2 {
		t.Errorf("db-1's restart wrote boot counter %d, want 2", back.counter)
	}
	vms["db-1"] = back
	c.samePoolVM(n, vms["db-0"], "after db-1's restart")
	// Both ready before the rollout, so that the sampler counts only
	// what the rollout takes down.
	testutil.Eventually(t, stateTimeout, "both VMs and the pool ready again", func() bool {
		return c.pool("db").GetStatus().GetReadyReplicas() == 2 &&
			apiv1.IsConditionTrue(c.vm("db-0").GetStatus().GetConditions(), apiv1.ConditionReady) &&
			apiv1.IsConditionTrue(c.vm("db-1").GetStatus().GetConditions(), apiv1.ConditionReady)
	})

	// 5. A template change rolls through, one VM at a time.
	roll := c.sampleRollout(1, "db-0", "db-1")
	var rolled time.Time
	testutil.EventuallyNoError(t, stateTimeout, "the pool's template updated", func() error {
		// The controller writes the pool's status meanwhile: a conflict
		// is retried on a fresh read.
		p = c.pool("db")
		kb := p.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.Firmware.KernelBoot
		kb.Cmdline = testguest.Cmdline(testguest.Persist("/dev/vda"), testguest.Hostname("db-v2"))
		rolled = time.Now()
		_, err := c.api.Pools.Update(c.ctx, &apiv1.UpdatePoolRequest{Pool: p})
		return err
	})
	testutil.EventuallyNoError(t, 2*bootTimeout, "the rollout to finish", func() error {
		p = c.pool("db")
		st := p.GetStatus()
		if gen := p.GetMetadata().GetGeneration(); st.GetUpdatedReplicas() != 2 || st.GetReadyReplicas() != 2 ||
			st.GetTemplateGeneration() != gen || st.GetObservedGeneration() != gen {
			return fmt.Errorf("status %v (generation %d)", st, gen)
		}
		return nil
	})
	took := time.Since(rolled)
	passes, errs := roll.halt()
	for _, name := range []string{"db-0", "db-1"} {
		before := vms[name]
		after := c.waitPoolVM(n, name, before.vmiUID)
		if got := testguest.Fields(after.con.waitMarker(testguest.MarkerBooted, stateTimeout))["hostname"]; got != "db-v2" {
			t.Errorf("%s after the rollout booted as %q, want the new template's hostname db-v2", name, got)
		}
		if after.counter != before.counter+1 {
			t.Errorf("%s's boot counter went from %d to %d over the rollout; want one restart", name, before.counter, after.counter)
		}
		if after.volume != before.volume {
			t.Errorf("%s's volume %s, was %s", name, after.volume, before.volume)
		}
		roll.mu.Lock()
		uids := roll.uids[name]
		roll.mu.Unlock()
		if want := []string{before.vmiUID, after.vmiUID}; !slices.Equal(uids, want) {
			t.Errorf("%s had instances %v during the rollout, want %v: restarted once", name, uids, want)
		}
		report(t, "rollout: %s restarted once, boot counter %d → %d", name, before.counter, after.counter)
	}
	roll.mu.Lock()
	defer roll.mu.Unlock()
	report(t, "rollout of 2 VMs, max_unavailable 1: done in %s (VMs down from %s to %s after the update); at most %d VM not Ready and %d without a ready instance in %d samples (%d failed)",
		took.Round(time.Millisecond), roll.firstDown.Sub(rolled).Round(time.Millisecond), roll.lastDown.Sub(rolled).Round(time.Millisecond),
		roll.maxNotReady, roll.maxDown, passes, errs)
	if len(roll.notReadyAt) > 0 || len(roll.downAt) > 0 {
		t.Errorf("more than max_unavailable (1) VMs down at once:\n%s", strings.Join(append(roll.notReadyAt, roll.downAt...), "\n"))
	}
	if roll.maxDown == 0 {
		t.Error("the sampler saw no VM down: the rollout restarted nothing")
	}
}

// samePoolVM checks that v's VM still runs the instance and QEMU it had,
// whose guest booted once.
func (c *mnCluster) samePoolVM(n *mnNode, v *poolVM, when string) {
	c.t.Helper()
	vmi := c.vmi(v.name)
	if got := vmi.GetMetadata().GetUid(); got != v.vmiUID || vmi.GetStatus().GetPhase() != apiv1.PhaseRunning {
		c.t.Errorf("%s %s: instance %s %s, want %s Running", v.name, when, got, vmi.GetStatus().GetPhase(), v.vmiUID)
	}
	if got := n.QEMUPid(c.domain(v.name)); got != v.qemu {
		c.t.Errorf("%s %s: QEMU %d, was %d", v.name, when, got, v.qemu)
	}
	if k := testguest.CountMarker(v.con.text(), testguest.MarkerPersistWrote); k != 1 {
		c.t.Errorf("%s %s: its console shows %d boot counter writes, want 1", v.name, when, k)
	}
}
