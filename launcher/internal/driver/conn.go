package driver

import "errors"

// Conn is the part of a libvirt connection the driver uses. The libvirt
// implementation lives in launcher/internal/virt (cgo); tests use a fake.
// Domain values must be released with Free.
type Conn interface {
	// LookupDomainByName returns ErrNoDomain when there is none.
	LookupDomainByName(name string) (Domain, error)
	DomainDefineXML(xml string) (Domain, error)
}

// Domain is one libvirt domain handle.
type Domain interface {
	GetName() (string, error)
	GetUUIDString() (string, error)
	// GetState returns the state and its reason (a per-state libvirt enum).
	GetState() (State, int, error)
	GetXMLDesc() (string, error)
	// GetMetadata returns the custom metadata element stored under the
	// namespace uri, or ErrNoMetadata.
	GetMetadata(uri string) (string, error)
	// SetMetadata replaces that element, in the live and the persistent
	// definition.
	SetMetadata(element, key, uri string) error
	// Create starts the defined domain, paused if asked.
	Create(paused bool) error
	// Shutdown asks the guest to power off (ACPI, default flags).
	Shutdown() error
	// Destroy powers the domain off; graceful sends QEMU only SIGTERM.
	Destroy(graceful bool) error
	// Undefine removes the persistent definition, keeping NVRAM.
	Undefine() error
	Suspend() error
	Resume() error
	Free()
}

var (
	// ErrNoDomain means libvirt has no domain of that name.
	ErrNoDomain = errors.New("domain not found")
	// ErrNoMetadata means the domain has no element in the namespace.
	ErrNoMetadata = errors.New("domain has no virtplane metadata")
	// ErrNotConnected means libvirtd is unreachable; the connection is
	// being re-established.
	ErrNotConnected = errors.New("not connected to libvirt")
)

// EventKind tells lifecycle events from connection events.
type EventKind int

const (
	// EventLifecycle is a libvirt domain lifecycle event.
	EventLifecycle EventKind = iota
	// EventReconnected is sent after the connection to libvirtd was
	// re-established: events may have been missed meanwhile.
	EventReconnected
	// EventAgent is a guest agent lifecycle event: Type is
	// virConnectDomainEventAgentLifecycleState (AgentConnected or
	// AgentDisconnected), Detail its reason.
	EventAgent
	// EventDeviceRemoved: a device left the live domain (libvirt's
	// device-removed event: the guest released an unplugged disk);
	// Alias names it.
	EventDeviceRemoved
	// EventDeviceRemovalFailed: QEMU reported that the guest refused to
	// release the device Alias names.
	EventDeviceRemovalFailed
)

// Guest agent lifecycle states (virConnectDomainEventAgentLifecycleState,
// libvirt's stable ABI; virt's tests check them against the bindings).
const (
	AgentConnected    = 1
	AgentDisconnected = 2
)

// NetworkDomain is what the launcher needs of a running domain's network
// (launcher/internal/virt implements it; tests use a fake).
type NetworkDomain interface {
	// HumanMonitorCommand runs an HMP command in QEMU (through libvirt)
	// and returns what QEMU printed: HMP reports a failed command in
	// that text, not as an error.
	HumanMonitorCommand(cmd string) (string, error)
	// InterfaceAddresses asks libvirt for the addresses of the domain's
	// interfaces as src knows them.
	InterfaceAddresses(src AddressSource) ([]GuestInterface, error)
}

// AddressSource is where libvirt finds a domain's interface addresses.
type AddressSource int

// Address sources (virDomainInterfaceAddressesSource).
const (
	// SourceLease: the DHCP leases of libvirt's networks.
	SourceLease AddressSource = 0
	// SourceAgent: the QEMU guest agent in the guest.
	SourceAgent AddressSource = 1
	// SourceARP: the host's neighbour table. The launcher reads it
	// itself (Config.Neighbours); libvirt 9.0's is unreliable.
	SourceARP AddressSource = 2
)

// GuestInterface is one interface libvirt reports addresses for.
type GuestInterface struct {
	// Name is the guest's name for it (agent) or the host's tap (lease,
	// ARP).
	Name string
	// MAC as libvirt prints it.
	MAC string
	// Addrs are IP literals, without prefix lengths.
	Addrs []string
}

// Event is what the libvirt side feeds the driver.
type Event struct {
	Kind EventKind
	// Domain is the domain name, for lifecycle events.
	Domain string
	// Type and Detail are virDomainEventType and its detail enum.
	Type   int
	Detail int
	// Alias is the device's alias, for device events.
	Alias string
}
