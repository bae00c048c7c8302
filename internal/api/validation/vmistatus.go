package validation

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Bounds of an instance's status, which node agents write. Kubernetes'
// metav1.Condition has the same reason and message limits.
const (
	// MaxStatusMessageLen bounds a condition's or the status's message.
	// Node agents clip what they write to it (ClipStatusMessage).
	MaxStatusMessageLen = 32 * 1024
	maxStatusReasonLen  = 1024
	maxConditionTypeLen = 316 // a qualified name: 253-byte prefix, '/', 63-byte name
	maxConditions       = 32
	// maxPhaseTransitions: an instance passes each phase once; the
	// bound leaves room for more phases to come.
	maxPhaseTransitions = 32
)

// vmiPhases are the phases an instance may be in (apiv1.Phase*).
var vmiPhases = []string{
	apiv1.PhaseUnset, apiv1.PhasePending, apiv1.PhaseScheduling, apiv1.PhaseScheduled,
	apiv1.PhaseRunning, apiv1.PhaseSucceeded, apiv1.PhaseFailed, apiv1.PhaseUnknown,
}

// ValidateVirtualMachineInstanceStatus checks a status a node agent sends
// (Instances.UpdateStatus): known phases and condition statuses, bounded
// lists and strings, node and interface names, addresses and the domain
// UUID in their forms. It does not judge transitions; who may write which
// instance is authorization's business. Callers drop unknown fields first
// (DiscardUnknown).
func ValidateVirtualMachineInstanceStatus(st *apiv1.VirtualMachineInstanceStatus, path *field.Path) field.ErrorList {
	if st == nil {
		return nil
	}
	var errs field.ErrorList
	errs = append(errs, oneOf(st.GetPhase(), path.Child("phase"), vmiPhases)...)

	ptt := path.Child("phase_transition_timestamps")
	if n := len(st.GetPhaseTransitionTimestamps()); n > maxPhaseTransitions {
		errs = append(errs, field.TooMany(ptt, n, maxPhaseTransitions))
	} else {
		for i, t := range st.GetPhaseTransitionTimestamps() {
			errs = append(errs, oneOf(t.GetPhase(), ptt.Index(i).Child("phase"), vmiPhases)...)
		}
	}

	errs = append(errs, validateConditions(st.GetConditions(), path.Child("conditions"))...)

	if n := st.GetNodeName(); n != "" {
		errs = append(errs, dns1123Subdomain(n, path.Child("node_name"))...)
	}
	errs = append(errs, validateInterfaceStatuses(st.GetInterfaces(), path.Child("interfaces"))...)
	errs = append(errs, validateVolumeStatuses(st.GetVolumeStatus(), path.Child("volume_status"))...)
	errs = append(errs, validatePrintable(st.GetReason(), maxStatusReasonLen, path.Child("reason"), true)...)
	errs = append(errs, validateStatusMessage(st.GetMessage(), path.Child("message"))...)
	if u := st.GetDomainUuid(); u != "" && CheckUID(u) != nil {
		errs = append(errs, field.Invalid(path.Child("domain_uuid"), u, "must be a UUID as libvirt prints it"))
	}
	if m := st.GetMigrationState(); m != nil {
		mp := path.Child("migration_state")
		if u := m.GetMigrationUid(); u != "" {
			errs = append(errs, ValidateUID(u, mp.Child("migration_uid"))...)
		}
		for _, n := range []struct{ name, v string }{{"source_node", m.GetSourceNode()}, {"target_node", m.GetTargetNode()}} {
			if n.v != "" {
				errs = append(errs, dns1123Subdomain(n.v, mp.Child(n.name))...)
			}
		}
		errs = append(errs, validateMigrationState(m, mp)...)
	}
	return errs
}

// validateConditions checks the conditions of a status: at most
// maxConditions, each type set and unique, known statuses, bounded
// reasons and messages.
func validateConditions(conds []*apiv1.Condition, cp *field.Path) field.ErrorList {
	if n := len(conds); n > maxConditions {
		return field.ErrorList{field.TooMany(cp, n, maxConditions)}
	}
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, c := range conds {
		p := cp.Index(i)
		switch t := c.GetType(); {
		case t == "":
			errs = append(errs, field.Required(p.Child("type"), ""))
		case seen[t]:
			errs = append(errs, field.Duplicate(p.Child("type"), t))
		default:
			seen[t] = true
			errs = append(errs, validatePrintable(t, maxConditionTypeLen, p.Child("type"), false)...)
		}
		errs = append(errs, oneOf(c.GetStatus(), p.Child("status"), []string{apiv1.ConditionTrue, apiv1.ConditionFalse, apiv1.ConditionUnknown})...)
		errs = append(errs, validatePrintable(c.GetReason(), maxStatusReasonLen, p.Child("reason"), true)...)
		errs = append(errs, validateStatusMessage(c.GetMessage(), p.Child("message"))...)
	}
	return errs
}

// maxDomainXML bounds the target's domain XML in a migration state (a
// virtplane domain is a few KiB).
const maxDomainXML = 256 << 10

func validateMigrationState(m *apiv1.MigrationState, mp *field.Path) field.ErrorList {
	var errs field.ErrorList
	// Where a migration goes gets bounds only: no API caller may change
	// it (the API server refuses any change before this runs), and the
	// source and its launcher check it (migrationdest.Validate) before
	// libvirt opens it.
	if a := m.GetTargetNodeAddress(); a != "" {
		errs = append(errs, validateIP(a, mp.Child("target_node_address"))...)
	}
	if u := m.GetTargetLibvirtUri(); u != "" {
		errs = append(errs, validatePrintable(u, 1024, mp.Child("target_libvirt_uri"), false)...)
	}
	if n := len(m.GetTargetDomainXml()); n > maxDomainXML {
		errs = append(errs, field.TooLong(mp.Child("target_domain_xml"), "", maxDomainXML))
	}
	errs = append(errs, validateStatusMessage(m.GetFailureReason(), mp.Child("failure_reason"))...)
	errs = append(errs, oneOf(m.GetMode(), mp.Child("mode"), []string{"", apiv1.MigrationModePreCopy, apiv1.MigrationModePostCopy, apiv1.MigrationModePaused})...)
	errs = append(errs, oneOf(m.GetAbortStatus(), mp.Child("abort_status"), []string{"", apiv1.MigrationAbortAborting, apiv1.MigrationAbortSucceeded, apiv1.MigrationAbortFailed})...)
	errs = append(errs, oneOf(m.GetMethod(), mp.Child("method"), []string{"", apiv1.MigrationMethodLive, apiv1.MigrationMethodBlock})...)
	return errs
}

// Bounds of an instance's interface status, which node agents keep to
// when they copy what a launcher or a guest agent reported.
const (
	// MaxInterfaceIPs bounds an interface's addresses.
	MaxInterfaceIPs = 16
	// MaxGuestInterfaceName bounds a guest's interface name as its agent
	// reports it (Linux allows 15 bytes, Windows far longer names).
	MaxGuestInterfaceName = 256
)

// ValidGuestInterfaceName says whether n may be an interface status's
// interface_name.
func ValidGuestInterfaceName(n string) bool {
	return len(n) <= MaxGuestInterfaceName && utf8.ValidString(n) && strings.IndexFunc(n, unicode.IsControl) < 0
}

func validateInterfaceStatuses(ifaces []*apiv1.InterfaceStatus, path *field.Path) field.ErrorList {
	if len(ifaces) > MaxDevices {
		return field.ErrorList{field.TooMany(path, len(ifaces), MaxDevices)}
	}
	var errs field.ErrorList
	for i, s := range ifaces {
		p := path.Index(i)
		if n := s.GetName(); n != "" {
			errs = append(errs, dns1123Label(n, p.Child("name"))...)
		}
		if m := s.GetMacAddress(); m != "" {
			if hw, err := net.ParseMAC(m); err != nil || len(hw) != 6 {
				errs = append(errs, field.Invalid(p.Child("mac_address"), m, "must be a MAC address such as 02:00:00:00:00:01"))
			}
		}
		if a := s.GetIpAddress(); a != "" {
			errs = append(errs, validateIP(a, p.Child("ip_address"))...)
		}
		errs = append(errs, oneOf(s.GetSource(), p.Child("source"), []string{"", apiv1.InterfaceSourceLease, apiv1.InterfaceSourceARP, apiv1.InterfaceSourceAgent})...)
		errs = append(errs, validateStatusMessage(s.GetInfo(), p.Child("info"))...)
		if n := s.GetInterfaceName(); !ValidGuestInterfaceName(n) {
			errs = append(errs, field.Invalid(p.Child("interface_name"), n, fmt.Sprintf("must be at most %d bytes of printable UTF-8", MaxGuestInterfaceName)))
		}
		ips := s.GetIpAddresses()
		if len(ips) > MaxInterfaceIPs {
			errs = append(errs, field.TooMany(p.Child("ip_addresses"), len(ips), MaxInterfaceIPs))
			continue
		}
		for j, a := range ips {
			errs = append(errs, validateIP(a, p.Child("ip_addresses").Index(j))...)
		}
	}
	return errs
}

func validateIP(s string, path *field.Path) field.ErrorList {
	if _, err := netip.ParseAddr(s); err != nil || len(s) > 64 {
		return field.ErrorList{field.Invalid(path, s, "must be an IP address")}
	}
	return nil
}

// validateStatusMessage: at most MaxStatusMessageLen bytes of valid UTF-8;
// newlines and tabs are allowed (libvirt's messages have them), other
// control characters are not.
func validateStatusMessage(s string, path *field.Path) field.ErrorList {
	switch {
	case len(s) > MaxStatusMessageLen:
		return field.ErrorList{field.TooLong(path, "", MaxStatusMessageLen)}
	case !utf8.ValidString(s):
		return field.ErrorList{field.Invalid(path, s, "must be valid UTF-8")}
	case strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }) >= 0:
		return field.ErrorList{field.Invalid(path, s, "must not contain control characters other than newlines and tabs")}
	}
	return nil
}

// ClipStatusMessage makes s a message ValidateVirtualMachineInstanceStatus
// accepts: valid UTF-8, control characters other than newlines and tabs
// replaced, at most MaxStatusMessageLen bytes. Node agents pass the
// errors they report through it, whatever libvirt or qemu-img said.
func ClipStatusMessage(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return '\uFFFD'
		}
		return r
	}, s)
	if len(s) <= MaxStatusMessageLen {
		return s
	}
	const ellipsis = "…"
	return strings.ToValidUTF8(s[:MaxStatusMessageLen-len(ellipsis)], "") + ellipsis
}
