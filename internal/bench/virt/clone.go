// Package virt is the benchmarks' direct libvirt access (cgo): the raw
// floor that virtplane's start is compared with, domain XML, versions, and
// cleanup. It is the benchmark's own code, not the launcher's: the point
// is to do what a bare libvirt client does, nothing more.
//
// The connection (virt.go) builds only with the libvirt build tag, as the
// benchmark command does (make bench); Clone is plain XML and builds
// always.
package virt

import (
	"fmt"

	"libvirt.org/go/libvirtxml"
)

// Clone returns domain XML x renamed to name, with no UUID (libvirt picks
// one), no metadata (so no virtplane node agent takes it for its own), no
// MAC addresses, and its serial console logged to logPath. Devices are
// otherwise the same.
func Clone(x, name, logPath string) (string, error) {
	var d libvirtxml.Domain
	if err := d.Unmarshal(x); err != nil {
		return "", fmt.Errorf("parsing domain XML: %w", err)
	}
	d.Name, d.UUID, d.Metadata = name, "", nil
	if d.Devices != nil {
		for i := range d.Devices.Serials {
			if d.Devices.Serials[i].Log != nil {
				d.Devices.Serials[i].Log.File = logPath
			}
		}
		for i := range d.Devices.Interfaces {
			d.Devices.Interfaces[i].MAC = nil
		}
	}
	out, err := d.Marshal()
	if err != nil {
		return "", fmt.Errorf("writing domain XML: %w", err)
	}
	return out, nil
}
