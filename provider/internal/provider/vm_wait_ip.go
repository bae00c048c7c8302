package provider

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// wait_for_ip: after create, and after an update that (re)started the
// guest or changed the block, wait until an interface of the running
// instance has a usable IP address in its status. Refresh never waits (a
// plan over many VMs must not block on guests' networking). The wait is
// waitVM's (watches plus a poll) with its own judge, bounded by the
// block's timeout inside the operation's own.

// ipWait is a wait_for_ip block resolved against the configuration.
type ipWait struct {
	// iface is the interface that must get an address.
	iface string
	// timeout bounds the wait; timeoutText is how the configuration
	// wrote it, for messages.
	timeout     time.Duration
	timeoutText string
}

// ipWaitOf resolves the block of m; ok is false when there is none. The
// interface defaults to the first one.
func ipWaitOf(m *vmResourceModel) (w ipWait, ok bool, err error) {
	b := m.WaitForIP
	if b == nil {
		return ipWait{}, false, nil
	}
	w = ipWait{iface: b.Interface.ValueString(), timeout: defaultWaitForIPTimeout, timeoutText: shortDuration(defaultWaitForIPTimeout)}
	if !b.Timeout.IsNull() && !b.Timeout.IsUnknown() {
		d, perr := time.ParseDuration(b.Timeout.ValueString())
		if perr != nil || d <= 0 {
			return ipWait{}, false, fmt.Errorf("wait_for_ip.timeout %q is not a positive duration", b.Timeout.ValueString())
		}
		w.timeout, w.timeoutText = d, b.Timeout.ValueString()
	}
	if w.iface == "" {
		if len(m.Interfaces) == 0 {
			return ipWait{}, false, errors.New("wait_for_ip needs an interface block: the VM has no interface to wait for")
		}
		w.iface = m.Interfaces[0].Name.ValueString()
	}
	return w, true, nil
}

// sameIPWait reports whether two wait_for_ip blocks ask for the same:
// a changed block is waited for again on update.
func sameIPWait(a, b *waitForIPModel) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Timeout.Equal(b.Timeout) && a.Interface.Equal(b.Interface)
}

// shouldWaitForIP decides whether apply waits for an address: only while
// an instance runs (a Halted VM, or a Once VM that already ended, has no
// address to get), and on update only when the guest was (re)started by
// this apply or the block was added or changed; a label change does not
// wait on the guest's network.
func shouldWaitForIP(vmi *apiv1.VirtualMachineInstance, creating, started, blockChanged bool) bool {
	if vmi == nil || apiv1.IsFinal(vmi.GetStatus().GetPhase()) {
		return false
	}
	return creating || started || blockChanged
}

// errIPTimeout marks a wait_for_ip that ran out of time.
var errIPTimeout = errors.New("no IP address in time")

// usableAddress is the interface's first address a client can reach the
// guest at: loopback, link-local and unspecified addresses (which a guest
// agent may report before the network is up) do not count.
func usableAddress(s *apiv1.InterfaceStatus) string {
	for _, a := range append([]string{s.GetIpAddress()}, s.GetIpAddresses()...) {
		ip, err := netip.ParseAddr(a)
		if err != nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() {
			continue
		}
		return a
	}
	return ""
}

// interfaceStatus is the instance's status of interface name; nil when
// the node reports none.
func interfaceStatus(vmi *apiv1.VirtualMachineInstance, name string) *apiv1.InterfaceStatus {
	for _, s := range vmi.GetStatus().GetInterfaces() {
		if s.GetName() == name {
			return s
		}
	}
	return nil
}

// judgeIP decides whether interface iface of the VM's instance has a
// usable address, or can no longer get one without help.
func judgeIP(iface string, vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) verdict {
	v := verdict{state: "interface " + iface + ": " + noAddressReason(iface, vm, vmi)}
	if vm.GetStatus().GetPrintableStatus() == apiv1.PrintableCrashLoopBackOff {
		v.err = crashLoopError(vm, vmi)
		return v
	}
	phase := vmi.GetStatus().GetPhase()
	if vmi == nil || apiv1.IsFinal(phase) {
		// Always (and RerunOnFailure after a failure) starts a new
		// instance, which may get an address; the others stay down.
		strategy := runStrategyOf(vm.GetSpec())
		restarts := strategy == apiv1.RunStrategyAlways ||
			(strategy == apiv1.RunStrategyRerunOnFailure && phase != apiv1.PhaseSucceeded)
		if !restarts {
			v.err = fmt.Errorf("the VM stopped (%s) before interface %q got an IP address", describe(vm, vmi), iface)
		}
		return v
	}
	if s := interfaceStatus(vmi, iface); phase == apiv1.PhaseRunning && s != nil && usableAddress(s) != "" {
		v.done = true
	}
	return v
}

// noAddressReason says why interface iface has no usable address, from
// what the node reported.
func noAddressReason(iface string, vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) string {
	switch phase := vmi.GetStatus().GetPhase(); {
	case vm == nil:
		return "the VM was not read yet"
	case vmi == nil || apiv1.IsFinal(phase):
		return "the VM has no running instance (" + describe(vm, vmi) + ")"
	case phase != apiv1.PhaseRunning:
		return "its instance is " + cmp.Or(phase, "Pending") + ", not running yet"
	}
	s := interfaceStatus(vmi, iface)
	switch {
	case s == nil:
		return "the node reports nothing about it yet"
	case usableAddress(s) != "":
		return "it has address " + usableAddress(s)
	case len(s.GetIpAddresses()) > 0:
		return "it has only loopback or link-local addresses (" + strings.Join(s.GetIpAddresses(), ", ") + ")"
	case s.GetInfo() != "":
		return strings.TrimSuffix(s.GetInfo(), ".")
	}
	return "the node reports no address and no reason"
}

// waitForIP waits for w on VM ns/name. It returns the last VM and
// instance seen, so that the state records what was found. A timeout is
// errIPTimeout with the reason the node gave; when ctx (the operation's
// timeout) ends first, the message says so.
func waitForIP(ctx context.Context, c *client.Client, ns, name string, w ipWait, op string) (*apiv1.VirtualMachine, *apiv1.VirtualMachineInstance, error) {
	ictx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	start := time.Now()
	vm, vmi, err := waitVM(ictx, c, ns, name, func(vm *apiv1.VirtualMachine, vmi *apiv1.VirtualMachineInstance) verdict {
		return judgeIP(w.iface, vm, vmi)
	})
	if !errors.Is(err, errWaitTimeout) {
		return vm, vmi, err
	}
	reason := noAddressReason(w.iface, vm, vmi)
	if vm == nil {
		// Never read: waitVM's message has the read error.
		reason = strings.TrimPrefix(err.Error(), errWaitTimeout.Error()+": ")
	}
	if ctx.Err() != nil {
		return vm, vmi, fmt.Errorf("%w: interface %q has no IP address after %s, when timeouts.%s ended: %s",
			errIPTimeout, w.iface, time.Since(start).Round(time.Second), op, reason)
	}
	return vm, vmi, fmt.Errorf("%w: interface %q has no IP address after %s: %s", errIPTimeout, w.iface, w.timeoutText, reason)
}

// defaultWaitForIPTimeout applies when wait_for_ip sets no timeout: a
// cloud image's DHCP client usually has an address within a minute.
const defaultWaitForIPTimeout = 5 * time.Minute
