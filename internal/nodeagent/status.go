package nodeagent

import (
	"bytes"
	"net"
	"net/netip"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// runningStatus reports a running domain: phase Running, Ready, the
// domain UUID, software emulation and pause state.
func runningStatus(d *launcherpb.DomainStatus, kvm bool) func(*apiv1.VirtualMachineInstanceStatus, time.Time) {
	return func(st *apiv1.VirtualMachineInstanceStatus, now time.Time) {
		st.SetPhase(apiv1.PhaseRunning, now)
		st.Reason, st.Message = "", ""
		if d.GetUuid() != "" {
			st.DomainUuid = d.GetUuid()
		}
		st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
			Type: apiv1.ConditionReady, Status: apiv1.ConditionTrue, Reason: "DomainRunning",
		}, now)
		if kvm {
			st.Conditions = apiv1.RemoveCondition(st.Conditions, apiv1.ConditionSoftwareEmulation)
		} else {
			st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
				Type: apiv1.ConditionSoftwareEmulation, Status: apiv1.ConditionTrue, Reason: "KVMUnavailable",
				Message: "KVM is not usable on this node; the guest runs in software emulation (TCG)",
			}, now)
		}
		if c := apiv1.FindCondition(st.Conditions, apiv1.ConditionSynchronized); c != nil && c.Status == apiv1.ConditionFalse {
			st.Conditions = apiv1.RemoveCondition(st.Conditions, apiv1.ConditionSynchronized)
		}
		st.Conditions = apiv1.RemoveCondition(st.Conditions, apiv1.ConditionProvisioning)
		setPausedCondition(st, d, now)
	}
}

// interfaceStatuses is the VMI's status.interfaces for a running
// domain: one per interface of spec, in its order, named and with the
// MAC of the spec, and the addresses (or why there are none) that the
// launcher found in the background (DomainStatus.interfaces). A launcher
// that has not looked yet reports none at all: the addresses the status
// had for an interface of the same name and MAC are kept meanwhile (a
// restarted launcher, the target of a live migration), so they do not
// flap. What is copied is checked against the API's bounds (a guest
// agent names the guest's interfaces), so the status write is never
// refused for it.
func interfaceStatuses(spec *apiv1.VirtualMachineInstanceSpec, d *launcherpb.DomainStatus, prev []*apiv1.InterfaceStatus) []*apiv1.InterfaceStatus {
	found := map[string]*apiv1.InterfaceStatus{}
	for _, s := range d.GetInterfaces() {
		found[s.GetName()] = s
	}
	if len(found) == 0 {
		for _, s := range prev {
			found[s.GetName()] = s
		}
	}
	var out []*apiv1.InterfaceStatus
	for _, i := range spec.GetDomain().GetDevices().GetInterfaces() {
		s := &apiv1.InterfaceStatus{Name: i.GetName(), MacAddress: i.GetMacAddress()}
		f := found[i.GetName()]
		if s.MacAddress == "" {
			s.MacAddress = f.GetMacAddress()
		}
		if f != nil && (f.GetMacAddress() == "" || sameMAC(f.GetMacAddress(), s.MacAddress)) {
			copyAddresses(s, f)
		}
		out = append(out, s)
	}
	return out
}

// copyAddresses copies from's addresses, source, info and guest
// interface name to s, leaving out what the API would refuse.
func copyAddresses(s, from *apiv1.InterfaceStatus) {
	for _, a := range from.GetIpAddresses() {
		if ip, err := netip.ParseAddr(a); err == nil && len(s.IpAddresses) < validation.MaxInterfaceIPs {
			s.IpAddresses = append(s.IpAddresses, ip.String())
		}
	}
	if len(s.IpAddresses) > 0 {
		s.IpAddress = s.IpAddresses[0]
		switch src := from.GetSource(); src {
		case apiv1.InterfaceSourceLease, apiv1.InterfaceSourceARP, apiv1.InterfaceSourceAgent:
			s.Source = src
		}
	}
	s.Info = validation.ClipStatusMessage(from.GetInfo())
	if n := from.GetInterfaceName(); validation.ValidGuestInterfaceName(n) {
		s.InterfaceName = n
	}
}

// sameMAC compares MAC addresses in any of the forms net.ParseMAC reads.
func sameMAC(a, b string) bool {
	x, err1 := net.ParseMAC(a)
	y, err2 := net.ParseMAC(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// setPausedCondition reflects a paused domain (KubeVirt
// calculatePausedCondition).
func setPausedCondition(st *apiv1.VirtualMachineInstanceStatus, d *launcherpb.DomainStatus, now time.Time) {
	if d.GetState() != statePaused || (!d.GetPausedByUser() && transientPause(d.GetReason())) {
		st.Conditions = apiv1.RemoveCondition(st.Conditions, apiv1.ConditionPaused)
		return
	}
	c := &apiv1.Condition{Type: apiv1.ConditionPaused, Status: apiv1.ConditionTrue}
	switch {
	case d.GetPausedByUser() || d.GetReason() == "User":
		c.Reason, c.Message = ReasonPausedByUser, "the VMI was paused by its user"
	case d.GetReason() == "IOError":
		c.Reason, c.Message = ReasonPausedIOError, "the guest was paused because of an I/O error"
	default:
		c.Reason, c.Message = "Paused", "libvirt reports the domain paused ("+d.GetReason()+")"
	}
	st.Conditions = apiv1.SetCondition(st.Conditions, c, now)
}

// transientPause reports libvirt pause reasons that are steps of
// something else rather than a paused guest. A guest panic stops QEMU
// (Paused/Unknown: QEMU's STOP comes before its GUEST_PANICKED event),
// then libvirt marks it crashed (Paused/Crashed on some versions) and
// applies on_crash; the end-to-end tests saw a crashing VM show "Paused"
// for seconds under load. QEMU is also paused around start and shutdown.
// KubeVirt likewise reports only the pauses it knows (user, I/O error).
func transientPause(reason string) bool {
	switch reason {
	case "Unknown", "Crashed", "StartingUp", "ShuttingDown":
		return true
	}
	return false
}
