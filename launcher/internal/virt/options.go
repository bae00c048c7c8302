// Package virt is the libvirt side of the launcher: driver.Conn over
// libvirt.org/go/libvirt (cgo), the default event loop, lifecycle event
// registration and reconnection after libvirtd restarts.
//
// The cgo files build only with the libvirt build tag (go build -tags
// libvirt, as make build does), so that the rest of the module builds and
// tests on a machine without libvirt's development files. The types here
// are tag-free: the launcher's commands compile either way and, without
// the tag, say so when run.
package virt

import (
	"log/slog"

	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver"
)

// Options configure a Connection.
type Options struct {
	Logger *slog.Logger
	// Events, when set, receives lifecycle events of every domain and an
	// EventReconnected after each reconnect. It is called on libvirt's
	// event-loop goroutine and must not block.
	Events func(driver.Event)
}

// HostInfo is what probe reports about the hypervisor host.
type HostInfo struct {
	LibvirtVersion    string
	HypervisorType    string
	HypervisorVersion string
	Hostname          string
	CPUs              uint
	MemoryKiB         uint64
}
