package main

import (
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/bench/virt"
)

// nodeConn is the migration benchmark's direct access to one private
// libvirt host: the raw path defines, starts and migrates domains there.
// openNodeLibvirt returns a *virt.Conn in a build with the libvirt tag
// (migration_libvirt_on.go); without it the benchmark fails at start.
type nodeConn interface {
	InactiveXML(name string) (string, error)
	SerialLogPath(name string) (string, error)
	Names(prefix string) ([]string, error)
	DefineAndStart(x string) (define, start time.Duration, err error)
	MigrateLive(name, targetURI, addr string) (virt.Migration, error)
	Remove(name string) error
	RemoveAll(prefix string) (int, error)
	Close() error
}
