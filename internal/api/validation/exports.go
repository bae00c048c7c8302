package validation

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

var exportSourceKinds = []string{apiv1.KindVirtualMachine, apiv1.KindSnapshot}

var exportPhases = []string{apiv1.ExportPending, apiv1.ExportReady, apiv1.ExportTerminated, apiv1.ExportSkipped}

// tokenHashRE is a lowercase hex SHA-256.
var tokenHashRE = regexp.MustCompile(`^[0-9a-f]{64}$`)

// maxExportCACertLen bounds status.ca_cert: a PEM chain of a few
// certificates.
const maxExportCACertLen = 16 << 10

// DefaultExport fills the namespace, source_kind VirtualMachine and the
// TTL of 2h.
func DefaultExport(e *apiv1.VirtualMachineExport) {
	if e == nil {
		return
	}
	DiscardUnknown(e)
	e.Metadata = defaultMetadata(e.Metadata)
	if e.Spec == nil {
		e.Spec = &apiv1.VirtualMachineExportSpec{}
	}
	if e.Spec.SourceKind == "" {
		e.Spec.SourceKind = apiv1.KindVirtualMachine
	}
	if e.Spec.TtlDuration == "" {
		e.Spec.TtlDuration = apiv1.DefaultExportTTL.String()
	}
}

// ValidateExport checks an export as submitted (after DefaultExport).
func ValidateExport(e *apiv1.VirtualMachineExport) field.ErrorList {
	errs := ValidateObjectMeta(e.GetMetadata(), true, field.NewPath("metadata"))
	spec := field.NewPath("spec")
	sp := e.GetSpec()
	if sp == nil {
		return append(errs, field.Required(spec, ""))
	}
	errs = append(errs, oneOf(sp.GetSourceKind(), spec.Child("source_kind"), exportSourceKinds)...)
	errs = append(errs, requiredName(sp.GetSourceName(), spec.Child("source_name"), "the VM or snapshot to export, in the export's namespace")...)
	if _, err := ExportTTL(sp.GetTtlDuration()); err != nil {
		errs = append(errs, field.Invalid(spec.Child("ttl_duration"), sp.GetTtlDuration(), err.Error()))
	}
	return errs
}

// ExportTTL parses a ttl_duration and holds it to its bounds.
func ExportTTL(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, errors.New(`must be a duration such as "2h" or "30m"`)
	case d < apiv1.MinExportTTL || d > apiv1.MaxExportTTL:
		return 0, fmt.Errorf("must be between %s and %s", apiv1.MinExportTTL, apiv1.MaxExportTTL)
	}
	return d, nil
}

// ValidateExportStatus checks a status the export controller writes.
// The links are the server's own, but they are what a client connects
// to: each must be an https URL of an export path.
func ValidateExportStatus(st *apiv1.VirtualMachineExportStatus, path *field.Path) field.ErrorList {
	if st == nil {
		return nil
	}
	errs := oneOf(st.GetPhase(), path.Child("phase"), exportPhases)
	errs = append(errs, validateConditions(st.GetConditions(), path.Child("conditions"))...)
	if n := st.GetNodeName(); n != "" {
		errs = append(errs, ValidateNodeName(n, path.Child("node_name"))...)
	}
	errs = append(errs, optionalUID(st.GetSourceUid(), path.Child("source_uid"))...)
	errs = append(errs, optionalUID(st.GetContentUid(), path.Child("content_uid"))...)
	if h := st.GetTokenSha256(); h != "" && !tokenHashRE.MatchString(h) {
		errs = append(errs, field.Invalid(path.Child("token_sha256"), h, "must be a lowercase hex SHA-256"))
	}
	if len(st.GetCaCert()) > maxExportCACertLen {
		errs = append(errs, field.TooLong(path.Child("ca_cert"), "", maxExportCACertLen))
	}
	vp := path.Child("volumes")
	if n := len(st.GetVolumes()); n > MaxDevices {
		return append(errs, field.TooMany(vp, n, MaxDevices))
	}
	for i, v := range st.GetVolumes() {
		errs = append(errs, dns1123Label(v.GetName(), vp.Index(i).Child("name"))...)
		if c := v.GetStorageClass(); c != "" {
			errs = append(errs, dns1123Subdomain(c, vp.Index(i).Child("storage_class"))...)
		}
		if n := len(v.GetLinks()); n > len(apiv1.ExportFormats) {
			errs = append(errs, field.TooMany(vp.Index(i).Child("links"), n, len(apiv1.ExportFormats)))
			continue
		}
		for j, l := range v.GetLinks() {
			lp := vp.Index(i).Child("links").Index(j)
			errs = append(errs, oneOf(l.GetFormat(), lp.Child("format"), apiv1.ExportFormats)...)
			if u := l.GetUrl(); !strings.HasPrefix(u, "https://") || !strings.Contains(u, apiv1.ExportPathPrefix) || len(u) > 1024 {
				errs = append(errs, field.Invalid(lp.Child("url"), u, "must be an https export link"))
			}
		}
	}
	return errs
}

// ParseExportAddress checks a node's export address: an IP literal and
// a port, written the one way netip writes it (export links are built
// from it, and a client connects where it says). Loopback is allowed: a
// one-host cluster serves its exports there.
func ParseExportAddress(s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	a := ap.Addr()
	switch {
	case err != nil:
		return netip.AddrPort{}, errors.New("must be an IP address and a port, such as 192.0.2.10:8444 or [2001:db8::1]:8444")
	case ap.String() != s:
		return netip.AddrPort{}, fmt.Errorf("must be written as %s", ap)
	case a.Zone() != "":
		return netip.AddrPort{}, errors.New("must not have a zone")
	case a.Is4In6():
		return netip.AddrPort{}, errors.New("is an IPv4-mapped IPv6 address")
	case a.IsUnspecified():
		return netip.AddrPort{}, errors.New("is the unspecified address: clients need the address to connect to")
	case a.IsMulticast():
		return netip.AddrPort{}, errors.New("is a multicast address")
	case ap.Port() == 0:
		return netip.AddrPort{}, errors.New("must have a port")
	}
	return ap, nil
}

// maxExportCertLen bounds a node's export certificate: one P-256
// certificate is about 600 bytes of PEM.
const maxExportCertLen = 4 << 10

// CheckExportCertificate checks the certificate a node registers for its
// export address: one PEM CERTIFICATE, self-signed, for a server
// (ServerAuth alone), no CA, naming exactly addr's IP and nothing else.
// Clients of the node's exports trust it alone (status.ca_cert), so it
// must be good for that one endpoint and nothing more.
func CheckExportCertificate(certPEM string, addr netip.Addr) error {
	if len(certPEM) > maxExportCertLen {
		return fmt.Errorf("longer than %d bytes", maxExportCertLen)
	}
	b, rest := pem.Decode([]byte(certPEM))
	if b == nil || b.Type != "CERTIFICATE" || strings.TrimSpace(string(rest)) != "" {
		return errors.New("must be one PEM CERTIFICATE block")
	}
	c, err := x509.ParseCertificate(b.Bytes)
	if err != nil {
		return fmt.Errorf("not a certificate: %w", err)
	}
	switch {
	case c.IsCA:
		return errors.New("must not be a CA")
	case len(c.ExtKeyUsage) != 1 || c.ExtKeyUsage[0] != x509.ExtKeyUsageServerAuth || len(c.UnknownExtKeyUsage) > 0:
		return errors.New("must have the server-authentication usage alone")
	case len(c.DNSNames) > 0 || len(c.EmailAddresses) > 0 || len(c.URIs) > 0:
		return errors.New("must name no DNS name, email or URI")
	case len(c.IPAddresses) != 1 || !c.IPAddresses[0].Equal(addr.AsSlice()):
		return fmt.Errorf("must name exactly the export address's IP %s", addr)
	}
	// Signed by its own key (CheckSignatureFrom would want a CA parent).
	if err := c.CheckSignature(c.SignatureAlgorithm, c.RawTBSCertificate, c.Signature); err != nil {
		return fmt.Errorf("must be self-signed: %w", err)
	}
	return nil
}

// validateExportEndpoint checks a node's export address and certificate:
// both or neither.
func validateExportEndpoint(st *apiv1.NodeStatus, path *field.Path) field.ErrorList {
	a, cert := st.GetExportAddress(), st.GetExportCertificate()
	if a == "" {
		if cert != "" {
			return field.ErrorList{field.Forbidden(path.Child("export_certificate"), "only with an export_address")}
		}
		return nil
	}
	ap, err := ParseExportAddress(a)
	if err != nil {
		return field.ErrorList{field.Invalid(path.Child("export_address"), a, err.Error())}
	}
	if cert == "" {
		return field.ErrorList{field.Required(path.Child("export_certificate"), "a node with an export_address serves with it")}
	}
	if err := CheckExportCertificate(cert, ap.Addr()); err != nil {
		return field.ErrorList{field.Invalid(path.Child("export_certificate"), "(certificate)", err.Error())}
	}
	return nil
}
