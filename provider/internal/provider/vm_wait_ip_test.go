package provider

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// runningWith is a Running instance whose node reports these interfaces.
func runningWith(ifaces ...*apiv1.InterfaceStatus) *apiv1.VirtualMachineInstance {
	vmi := vmiWith("i1", apiv1.PhaseRunning, true)
	vmi.Status.Interfaces = ifaces
	return vmi
}

func withStrategy(vm *apiv1.VirtualMachine, strategy string) *apiv1.VirtualMachine {
	vm.Spec = &apiv1.VirtualMachineSpec{RunStrategy: strategy}
	return vm
}

func TestJudgeIP(t *testing.T) {
	running := withStrategy(vmWith(apiv1.PrintableRunning, true, 1), apiv1.RunStrategyAlways)
	noLease := &apiv1.InterfaceStatus{Name: "default", MacAddress: "02:00:00:00:00:01", Info: "no DHCP lease for 02:00:00:00:00:01"}
	type want int
	const (
		wait want = iota
		done
		fail
	)
	for _, c := range []struct {
		name    string
		vm      *apiv1.VirtualMachine
		vmi     *apiv1.VirtualMachineInstance
		want    want
		saysHas string
	}{
		{"address", running, runningWith(&apiv1.InterfaceStatus{Name: "default", IpAddress: "10.0.2.15"}), done, "it has address 10.0.2.15"},
		{"address only in the list", running, runningWith(&apiv1.InterfaceStatus{Name: "default", IpAddresses: []string{"192.168.1.7"}}), done, "192.168.1.7"},
		{"another interface's address", running, runningWith(noLease, &apiv1.InterfaceStatus{Name: "lan", IpAddress: "192.168.1.7"}), wait,
			"no DHCP lease for 02:00:00:00:00:01"},
		{"no status for it", running, runningWith(), wait, "the node reports nothing about it yet"},
		{"loopback and link-local do not count", running,
			runningWith(&apiv1.InterfaceStatus{Name: "default", IpAddress: "127.0.0.1", IpAddresses: []string{"127.0.0.1", "169.254.3.4", "fe80::1"}}),
			wait, "only loopback or link-local addresses (127.0.0.1, 169.254.3.4, fe80::1)"},
		{"not running yet", running, vmiWith("i1", apiv1.PhaseScheduled, false), wait, "its instance is Scheduled, not running yet"},
		{"Always restarts a stopped guest", running, nil, wait, "the VM has no running instance"},
		{"Once does not", withStrategy(vmWith(apiv1.PrintableStopped, false, 1), apiv1.RunStrategyOnce),
			vmiWith("i1", apiv1.PhaseSucceeded, false), fail, "the VM stopped"},
		{"RerunOnFailure after a clean power-off does not", withStrategy(vmWith(apiv1.PrintableStopped, false, 1), apiv1.RunStrategyRerunOnFailure),
			vmiWith("i1", apiv1.PhaseSucceeded, false), fail, "the VM stopped"},
		{"RerunOnFailure after a failure does", withStrategy(vmWith(apiv1.PrintableStarting, false, 1), apiv1.RunStrategyRerunOnFailure),
			vmiWith("i1", apiv1.PhaseFailed, false), wait, "no running instance"},
		{"crash loop", withStrategy(vmWith(apiv1.PrintableCrashLoopBackOff, false, 1), apiv1.RunStrategyAlways), nil, fail, "CrashLoopBackOff"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := judgeIP("default", c.vm, c.vmi)
			got := wait
			switch {
			case v.err != nil:
				got = fail
			case v.done:
				got = done
			}
			if got != c.want {
				t.Errorf("judgeIP = done %v, err %v; want %d", v.done, v.err, c.want)
			}
			text := v.state
			if v.err != nil {
				text += " / " + v.err.Error()
			}
			if !strings.Contains(text, c.saysHas) {
				t.Errorf("judgeIP says %q, want it to say %q", text, c.saysHas)
			}
		})
	}
}

// seqVMIs returns its instances in turn (the last one repeats).
type seqVMIs struct {
	apiv1.VirtualMachineInstancesClient
	mu  sync.Mutex
	seq []*apiv1.VirtualMachineInstance
}

func (s *seqVMIs) Get(context.Context, *apiv1.GetVirtualMachineInstanceRequest, ...grpc.CallOption) (*apiv1.VirtualMachineInstance, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	vmi := s.seq[0]
	if len(s.seq) > 1 {
		s.seq = s.seq[1:]
	}
	return proto.Clone(vmi).(*apiv1.VirtualMachineInstance), nil
}

func (*seqVMIs) Watch(context.Context, *apiv1.WatchVirtualMachineInstancesRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[apiv1.VirtualMachineInstanceEvent], error) {
	return nil, status.Error(codes.Unimplemented, "no watch")
}

func ipClient(vmis ...*apiv1.VirtualMachineInstance) *client.Client {
	vm := withStrategy(vmWith(apiv1.PrintableRunning, true, 1), apiv1.RunStrategyAlways)
	return &client.Client{VMs: &fakeVMs{seq: []*apiv1.VirtualMachine{vm}}, VMIs: &seqVMIs{seq: vmis}}
}

// The wait ends when the address appears and returns the instance that
// has it, so that the state records it.
func TestWaitForIPReturnsTheAddress(t *testing.T) {
	fastPoll(t)
	noLease := &apiv1.InterfaceStatus{Name: "default", Info: "no DHCP lease for 02:00:00:00:00:01"}
	c := ipClient(runningWith(noLease), runningWith(noLease), runningWith(&apiv1.InterfaceStatus{Name: "default", IpAddress: "10.0.2.15"}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, vmi, err := waitForIP(ctx, c, "default", "web", ipWait{iface: "default", timeout: 5 * time.Second, timeoutText: "5s"}, "create")
	if err != nil {
		t.Fatal(err)
	}
	if got := usableAddress(interfaceStatus(vmi, "default")); got != "10.0.2.15" {
		t.Errorf("the instance returned has address %q, want 10.0.2.15", got)
	}
}

// A timeout names the interface, the time waited as configured, and the
// node's reason; when the operation's own timeout ends first, it says so.
func TestWaitForIPTimeoutSaysWhy(t *testing.T) {
	fastPoll(t)
	noLease := runningWith(&apiv1.InterfaceStatus{Name: "default", MacAddress: "02:00:00:00:00:01", Info: "no DHCP lease for 02:00:00:00:00:01."})
	w := ipWait{iface: "default", timeout: 50 * time.Millisecond, timeoutText: "50ms"}
	_, vmi, err := waitForIP(context.Background(), ipClient(noLease), "default", "web", w, "create")
	if !errors.Is(err, errIPTimeout) {
		t.Fatalf("err = %v, want an IP timeout", err)
	}
	if want := `interface "default" has no IP address after 50ms: no DHCP lease for 02:00:00:00:00:01`; !strings.HasSuffix(err.Error(), want) {
		t.Errorf("err = %q, want it to end %q", err, want)
	}
	if vmi == nil {
		t.Error("the last instance seen is not returned")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	w.timeout, w.timeoutText = time.Hour, "1h"
	_, _, err = waitForIP(ctx, ipClient(noLease), "default", "web", w, "update")
	if !errors.Is(err, errIPTimeout) || !strings.Contains(err.Error(), "when timeouts.update ended: no DHCP lease") {
		t.Errorf("err = %v, want a timeout that blames timeouts.update", err)
	}

	var diags diagsT
	(&vmResource{}).addIPWaitError(&diags.d, err, "default/web", "update")
	if d := diags.d.Errors(); len(d) != 1 || !strings.Contains(d[0].Detail(), "raise wait_for_ip.timeout (and timeouts.update)") {
		t.Errorf("diagnostics = %v", diags.d)
	}
}

// A guest that stops for good ends the wait at once instead of at the
// timeout.
func TestWaitForIPEndsWhenTheGuestStops(t *testing.T) {
	fastPoll(t)
	vm := withStrategy(vmWith(apiv1.PrintableStopped, false, 1), apiv1.RunStrategyOnce)
	c := &client.Client{VMs: &fakeVMs{seq: []*apiv1.VirtualMachine{vm}}, VMIs: &seqVMIs{seq: []*apiv1.VirtualMachineInstance{vmiWith("i1", apiv1.PhaseSucceeded, false)}}}
	start := time.Now()
	_, _, err := waitForIP(context.Background(), c, "default", "web", ipWait{iface: "default", timeout: time.Minute, timeoutText: "1m"}, "create")
	if err == nil || errors.Is(err, errIPTimeout) || time.Since(start) > 10*time.Second {
		t.Errorf("err = %v after %s, want an early failure", err, time.Since(start))
	}
}

func TestIPWaitOf(t *testing.T) {
	ifaces := []interfaceModel{{Name: types.StringValue("lan")}, {Name: types.StringValue("default")}}
	for _, c := range []struct {
		name    string
		block   *waitForIPModel
		ifaces  []interfaceModel
		want    ipWait
		ok      bool
		errHas  string
		wantErr bool
	}{
		{"no block", nil, ifaces, ipWait{}, false, "", false},
		{"defaults: the first interface, 5m", &waitForIPModel{Timeout: types.StringNull(), Interface: types.StringNull()}, ifaces,
			ipWait{iface: "lan", timeout: 5 * time.Minute, timeoutText: "5m"}, true, "", false},
		{"set", &waitForIPModel{Timeout: types.StringValue("90s"), Interface: types.StringValue("default")}, ifaces,
			ipWait{iface: "default", timeout: 90 * time.Second, timeoutText: "90s"}, true, "", false},
		{"no interface", &waitForIPModel{Timeout: types.StringNull(), Interface: types.StringNull()}, nil,
			ipWait{}, false, "needs an interface block", true},
		{"bad timeout", &waitForIPModel{Timeout: types.StringValue("soon"), Interface: types.StringNull()}, ifaces,
			ipWait{}, false, `"soon" is not a positive duration`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &vmResourceModel{vmModel: vmModel{vmSpecModel: vmSpecModel{instanceSpecModel: instanceSpecModel{Interfaces: c.ifaces}}}, WaitForIP: c.block}
			w, ok, err := ipWaitOf(m)
			if (err != nil) != c.wantErr || (err != nil && !strings.Contains(err.Error(), c.errHas)) {
				t.Fatalf("err = %v, want one saying %q: %v", err, c.errHas, c.wantErr)
			}
			if w != c.want || ok != c.ok {
				t.Errorf("ipWaitOf = %+v, %v; want %+v, %v", w, ok, c.want, c.ok)
			}
		})
	}
}

// Create waits whenever an instance runs; update only when it started
// the guest or the block changed; nothing waits without a running
// instance.
func TestShouldWaitForIP(t *testing.T) {
	run := vmiWith("i", apiv1.PhaseRunning, true)
	done := vmiWith("i", apiv1.PhaseSucceeded, false)
	for _, c := range []struct {
		name                           string
		vmi                            *apiv1.VirtualMachineInstance
		creating, started, changedWait bool
		want                           bool
	}{
		{"create", run, true, false, false, true},
		{"create of a Halted VM", nil, true, false, false, false},
		{"create of a Once VM that already ended", done, true, false, false, false},
		{"update that restarted", run, false, true, false, true},
		{"update that changed the block", run, false, false, true, true},
		{"update of labels", run, false, false, false, false},
		{"update to Halted", nil, false, true, true, false},
	} {
		if got := shouldWaitForIP(c.vmi, c.creating, c.started, c.changedWait); got != c.want {
			t.Errorf("%s: shouldWaitForIP = %v, want %v", c.name, got, c.want)
		}
	}
	a := &waitForIPModel{Timeout: types.StringValue("1m"), Interface: types.StringNull()}
	b := &waitForIPModel{Timeout: types.StringValue("2m"), Interface: types.StringNull()}
	if !sameIPWait(nil, nil) || sameIPWait(a, nil) || sameIPWait(nil, a) || sameIPWait(a, b) || !sameIPWait(a, &waitForIPModel{Timeout: types.StringValue("1m"), Interface: types.StringNull()}) {
		t.Error("sameIPWait compares wrongly")
	}
}
