//go:build libvirt

package virt

import "fmt"

// HostInfo queries versions and host facts.
func (c *Connection) HostInfo() (HostInfo, error) {
	conn, err := c.current()
	if err != nil {
		return HostInfo{}, err
	}
	defer release(conn)
	var h HostInfo
	lib, err := conn.GetLibVersion()
	if err != nil {
		return h, fmt.Errorf("libvirt version: %w", c.wrap(conn, err))
	}
	h.LibvirtVersion = version(lib)
	if h.HypervisorType, err = conn.GetType(); err != nil {
		return h, fmt.Errorf("hypervisor type: %w", c.wrap(conn, err))
	}
	hv, err := conn.GetVersion()
	if err != nil {
		return h, fmt.Errorf("hypervisor version: %w", c.wrap(conn, err))
	}
	h.HypervisorVersion = version(hv)
	if h.Hostname, err = conn.GetHostname(); err != nil {
		return h, fmt.Errorf("hostname: %w", c.wrap(conn, err))
	}
	if ni, err := conn.GetNodeInfo(); err == nil {
		h.CPUs, h.MemoryKiB = ni.Cpus, ni.Memory
	}
	return h, nil
}

// version renders libvirt's major*1e6 + minor*1e3 + micro encoding.
func version(v uint32) string {
	return fmt.Sprintf("%d.%d.%d", v/1000000, v/1000%1000, v%1000)
}
