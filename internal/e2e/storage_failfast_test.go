package e2e

import (
	"bytes"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller/vmi"
	"github.com/virtplane/terraform-provider-virtplane/internal/guestnet"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// failFastTimeout bounds each case: the slowest expected is the start
// bound (storageStartTimeout) plus the destroy and the status write.
const failFastTimeout = 90 * time.Second

// storageStartTimeout is the node agents' --storage-start-timeout here:
// short, so that an OSD that does not answer fails a start in a test's
// time (the default is a minute).
const storageStartTimeout = 20 * time.Second

// TestRBDStartFailsFast is issue 34's "an unreachable or wrong monitor
// fails a start within seconds with the cause, never a 5-minute hang",
// on the package's Ceph cluster, timed from the VM's creation:
//
//   - classes the node cannot use (a monitor nobody listens on, a wrong
//     key, a pool that does not exist): the node says why, and the VM's
//     instance is Unschedulable with that cause;
//   - a class the node reaches but its QEMUs do not (the monitor's
//     packets of QEMU's user dropped in the node's namespace: a
//     firewall, a route): QEMU gives up on the monitor after the class's
//     ceph.conf's client_mount_timeout, not librados' 300 s, and the
//     instance fails naming the image and the cause;
//   - the monitor reachable and the OSDs not (for QEMU): librados would
//     wait for ever; the launcher destroys the domain at the node's
//     start bound and the instance fails saying the storage did not
//     answer.
func TestRBDStartFailsFast(t *testing.T) {
	t.Parallel()
	c := newMultiNodeCluster(t, mnOptions{ceph: true, nodes: 1,
		nodeArgs: []string{"--storage-start-timeout", storageStartTimeout.String()}})
	t.Cleanup(c.dumpOnFailure)
	n := c.nodes[0]
	cl, hub := sharedCeph.Get(t)
	good := c.rbdClass("good")
	// Its key, which the API never returns: get-or-create gives it again.
	user := good.GetSpec().GetRbd().GetUser()
	key, err := cl.CreateUser(c.ctx, user, rbdCaps(c.cephPool())...)
	if err != nil {
		t.Fatal(err)
	}
	key = strings.TrimSpace(key)
	mon := netip.MustParseAddrPort(cl.Monitors()[0])

	// The node cannot use the class.
	for _, tc := range []struct {
		class string
		rbd   *apiv1.RBDStorage
		cause string
		// within is what the node needs to find out: the monitor's
		// bound (ceph.ConnectTimeout) for a monitor that does not
		// answer, a round trip otherwise; plus the report and the
		// scheduler.
		within time.Duration
	}{
		{"nomon", &apiv1.RBDStorage{Monitors: []string{netip.AddrPortFrom(mon.Addr(), 3999).String()}, Pool: c.cephPool(), User: user, Key: key},
			"no monitor answered (spec.rbd.monitors)", 30 * time.Second},
		{"wrongkey", &apiv1.RBDStorage{Monitors: cl.Monitors(), Pool: c.cephPool(), User: user, Key: "AQCauhZroSmaLxAADcjclatTLvDt1b2rQ3bj4Q=="},
			"the monitors refused the user or key (spec.rbd.user, spec.rbd.key)", 10 * time.Second},
		{"nopool", &apiv1.RBDStorage{Monitors: cl.Monitors(), Pool: "nopool" + strings.ReplaceAll(c.ns, "-", ""), User: user, Key: key},
			"the pool does not exist (spec.rbd.pool)", 10 * time.Second},
	} {
		if _, err := c.api.StorageClasses.Create(c.ctx, &apiv1.CreateStorageClassRequest{StorageClass: &apiv1.StorageClass{
			Metadata: &apiv1.ObjectMeta{Name: tc.class}, Spec: &apiv1.StorageClassSpec{Rbd: tc.rbd}}}); err != nil {
			t.Fatal(err)
		}
		began := time.Now()
		c.create(rbdGuest(c, n, tc.class, tc.class))
		want := fmt.Sprintf("1 node(s) could not reach storage class %s (%s)", tc.class, tc.cause)
		var last string
		testutil.EventuallyNoError(t, failFastTimeout, tc.class+": the cause on the instance", func() error {
			cond := apiv1.FindCondition(c.vmi(tc.class).GetStatus().GetConditions(), apiv1.ConditionPodScheduled)
			last = cond.GetMessage()
			if cond.GetReason() != vmi.ReasonUnschedulable || !strings.Contains(last, want) {
				return fmt.Errorf("scheduled condition %v, want Unschedulable saying %q", cond, want)
			}
			return nil
		})
		took := time.Since(began)
		t.Logf("%s: %q after %s", tc.class, last, took.Round(time.Millisecond))
		if took > tc.within {
			t.Errorf("%s: the cause showed after %s, want within %s", tc.class, took.Round(time.Millisecond), tc.within)
		}
	}

	// The node reaches the class, its QEMUs do not.
	uids, _, qerr := guestnet.QEMUIDs(c.ctx, "", n.URI)
	if qerr != nil {
		t.Fatal(qerr)
	}
	for _, tc := range []struct {
		name, ports, want string
		within            time.Duration
	}{
		{"qemu-nomon", "3300, 6789", "start domain: QEMU could not open rbd image " + c.cephPool() + "/", 45 * time.Second},
		{"qemu-noosd", "6800-7300", fmt.Sprintf("start domain: the storage did not answer within %s: QEMU had not opened rbd image %s/", storageStartTimeout, c.cephPool()),
			storageStartTimeout + 40*time.Second},
	} {
		unblock := dropQEMUTo(t, n.NetNS, uids[0], hub.Hub().Addr, tc.ports)
		began := time.Now()
		c.create(rbdGuest(c, n, tc.name, "good"))
		var st *apiv1.VirtualMachineInstanceStatus
		testutil.EventuallyNoError(t, failFastTimeout, tc.name+": the instance failed with the cause", func() error {
			st = c.vmi(tc.name).GetStatus()
			if st.GetPhase() != apiv1.PhaseFailed || !strings.Contains(st.GetMessage(), tc.want) {
				return fmt.Errorf("instance %s (%s: %s), want Failed saying %q", st.GetPhase(), st.GetReason(), st.GetMessage(), tc.want)
			}
			return nil
		})
		took := time.Since(began)
		unblock()
		t.Logf("%s: %s: %q after %s", tc.name, st.GetReason(), st.GetMessage(), took.Round(time.Millisecond))
		if took > tc.within {
			t.Errorf("%s: failed after %s, want within %s", tc.name, took.Round(time.Millisecond), tc.within)
		}
		if strings.Contains(st.GetMessage(), "key-secret") || strings.Contains(st.GetMessage(), key) {
			t.Errorf("%s: the message quotes QEMU's command line: %q", tc.name, st.GetMessage())
		}
	}
	if ok, err := n.HasDomain(c.ctx, c.domain("qemu-noosd")); err == nil && ok {
		if state, _ := n.DomainState(c.ctx, c.domain("qemu-noosd")); strings.Contains(state, "paused") || strings.Contains(state, "running") {
			t.Errorf("the domain whose start hung is %s, want it destroyed", state)
		}
	}
}

// rbdGuest is a guest VM on n, started once, with a 64Mi volume on class.
func rbdGuest(c *mnCluster, n *mnNode, name, class string) *apiv1.VirtualMachine {
	vm := guestVM(c.ns, name, apiv1.RunStrategyOnce, n.Kernel, testguest.Cmdline(testguest.Persist("/dev/vda")))
	vm.Spec.Template.Spec.NodeSelector = map[string]string{apiv1.LabelNodeName: n.Name}
	return withDisks(vm, []*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}},
		[]*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "64Mi", StorageClass: class}}})
}

// dropQEMUTo drops the TCP packets QEMU's user (uid) sends to addr's
// ports ("3300, 6789", "6800-7300") in network namespace netns, with a
// table of the test's own that runs before the guest firewall: the
// storage goes silent for QEMU, while the node agent's CLIs (root) still
// reach it. The returned func removes the table.
func dropQEMUTo(t *testing.T, netns string, uid uint32, addr, ports string) (undo func()) {
	t.Helper()
	table := "vp_e2e_drop"
	ruleset := fmt.Sprintf("table inet %s {\n\tchain out {\n\t\ttype filter hook output priority -10; policy accept;\n"+
		"\t\tmeta skuid %d ip daddr %s tcp dport { %s } drop\n\t}\n}\n", table, uid, addr, ports)
	nft := func(stdin string, args ...string) error {
		cmd := exec.Command("ip", append([]string{"netns", "exec", netns, "nft"}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("nft %s in %s: %w: %s", strings.Join(args, " "), netns, err, out.Bytes())
		}
		return nil
	}
	if err := nft(ruleset, "-f", "-"); err != nil {
		t.Fatal(err)
	}
	done := false
	undo = func() {
		if !done {
			done = true
			if err := nft("", "delete", "table", "inet", table); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(undo)
	return undo
}
