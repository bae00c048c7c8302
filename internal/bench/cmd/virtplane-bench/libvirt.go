package main

import "time"

// libvirtConn is the benchmarks' direct libvirt access. openLibvirt
// returns a *virt.Conn in a build with the libvirt tag (libvirt_on.go);
// without it (libvirt_off.go) the benchmark fails at start.
type libvirtConn interface {
	Versions() (libvirtVersion, hypervisor string, err error)
	InactiveXML(name string) (string, error)
	SerialLogPath(name string) (string, error)
	Names(prefix string) ([]string, error)
	RunningNotPrefixed(prefix string) int
	DefineAndStart(x string) (define, start time.Duration, err error)
	Remove(name string) error
	RemoveAll(prefix string) (int, error)
	Close() error
}
