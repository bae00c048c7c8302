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
)

// Event is what the libvirt side feeds the driver.
type Event struct {
	Kind EventKind
	// Domain is the domain name, for lifecycle events.
	Domain string
	// Type and Detail are virDomainEventType and its detail enum.
	Type   int
	Detail int
}
