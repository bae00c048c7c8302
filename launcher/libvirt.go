package main

import (
	"errors"

	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/virt"
)

// libvirtConn is what the launcher's commands use of a libvirt connection.
// openLibvirt returns a *virt.Connection in a build with the libvirt tag
// (libvirt_on.go); without it (libvirt_off.go) every command that needs
// libvirt fails with errNoLibvirt.
type libvirtConn interface {
	driver.Conn
	ListAllDomains() ([]driver.Domain, error)
	HostInfo() (virt.HostInfo, error)
	ListNetworks() ([]virt.NetworkInfo, error)
	Close() error
}

// errNoLibvirt is why a launcher built without the libvirt tag cannot run:
// the module builds without libvirt's development files, and such a binary
// must say so rather than fail later in a way that looks like a libvirtd
// problem.
var errNoLibvirt = errors.New("built without libvirt support: build with -tags libvirt / make build")
