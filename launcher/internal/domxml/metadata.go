package domxml

import (
	"encoding/xml"
	"fmt"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Namespace is the XML namespace of virtplane's domain metadata. libvirt
// keys custom metadata by namespace URI, so one element per domain lives
// under it.
const Namespace = "https://virtplane.io/xmlns/domain/1"

// NamespacePrefix is the prefix libvirt stores the element under when it is
// written through virDomainSetMetadata.
const NamespacePrefix = "virtplane"

// Metadata is what virtplane records in the domain itself, so that it
// survives launcher and node-agent restarts and even the VMI object's
// deletion (KubeVirt keeps the grace period in domain metadata for the same
// reason). The element is flat on purpose: virDomainSetMetadata puts the
// namespace on the root and its direct children only.
type Metadata struct {
	// XMLName is set by the marshal helpers (an XMLName tag would override
	// the namespace); parsing accepts any namespace because libvirt returns
	// the element without it.
	XMLName   xml.Name
	UID       string `xml:"uid"`
	Namespace string `xml:"namespace"`
	Name      string `xml:"name"`
	// GracePeriodSeconds is the VMI's termination grace period.
	GracePeriodSeconds int64 `xml:"gracePeriodSeconds"`
	// PausedByUser marks a Pause RPC, so Sync does not resume the domain.
	PausedByUser bool `xml:"pausedByUser,omitempty"`
	// ShutdownRequestedAt is the unix time of the first ACPI shutdown
	// request, the start of the grace period.
	ShutdownRequestedAt int64 `xml:"shutdownRequestedAt,omitempty"`
	// NodeFailurePolicy is the VM's node_failure_policy. It lives here so
	// that the lease watchdog decides without the API (docs/failover.md,
	// point 3): only a RestartElsewhere domain is ever fenced; empty
	// counts as Wait, the safe default.
	NodeFailurePolicy string `xml:"nodeFailurePolicy,omitempty"`
	// Node is the node the VMI was placed on when the domain was
	// defined. A node agent removes as orphans only the domains of its own
	// node: another agent sharing the libvirtd (a second node name on one
	// host, tests) owns the rest.
	Node string `xml:"node,omitempty"`
	// Migration is the last live migration this domain took part in,
	// written before libvirt's job starts and when it ends, so that a
	// launcher that restarts meanwhile still knows what it was doing.
	Migration *MigrationRecord `xml:"migration,omitempty"`
	// SharedDisks are the disks (by VMI disk name) whose files are on a
	// shared filesystem that every node of their storage class mounts: a
	// live migration leaves them where they are. (RBD disks are network
	// disks, which libvirt never copies.)
	SharedDisks []string `xml:"sharedDisk,omitempty"`
	// Adopted marks a domain virtplane took over (docs/adopt.md): it was
	// defined outside virtplane, so its serial console writes no log; the
	// launcher copies its pty into the console log instead.
	Adopted bool `xml:"adopted,omitempty"`
}

// MigrationRecord is a launcher's note of one live migration.
type MigrationRecord struct {
	UID string `xml:"uid,attr"`
	// Role is source or target.
	Role string `xml:"role,attr"`
	// Start and End are unix milliseconds; End is 0 while it runs.
	Start       int64  `xml:"start,omitempty"`
	End         int64  `xml:"end,omitempty"`
	Failed      bool   `xml:"failed,omitempty"`
	Reason      string `xml:"reason,omitempty"`
	Mode        string `xml:"mode,omitempty"`
	AbortStatus string `xml:"abortStatus,omitempty"`
}

// FencedOnLeaseExpiry reports whether the lease watchdog may destroy the
// domain: only for the RestartElsewhere policy.
func (m Metadata) FencedOnLeaseExpiry() bool {
	return m.NodeFailurePolicy == apiv1.NodeFailurePolicyRestartElsewhere
}

// MarshalNamespaced returns the element with its namespace declared, for
// embedding in domain XML.
func (m Metadata) MarshalNamespaced() (string, error) {
	m.XMLName = xml.Name{Space: Namespace, Local: "vmi"}
	return marshal(m)
}

// MarshalElement returns the element without a namespace, the form
// virDomainSetMetadata wants (it adds the namespace from its uri and key
// arguments).
func (m Metadata) MarshalElement() (string, error) {
	m.XMLName = xml.Name{Local: "vmi"}
	return marshal(m)
}

func marshal(m Metadata) (string, error) {
	b, err := xml.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("marshal domain metadata: %w", err)
	}
	return string(b), nil
}

// ParseMetadata parses the element returned by virDomainGetMetadata.
func ParseMetadata(s string) (Metadata, error) {
	var m Metadata
	if err := xml.Unmarshal([]byte(s), &m); err != nil {
		return Metadata{}, fmt.Errorf("parse domain metadata: %w", err)
	}
	if m.XMLName.Local != "vmi" {
		return Metadata{}, fmt.Errorf("parse domain metadata: unexpected element <%s>", m.XMLName.Local)
	}
	return m, nil
}
