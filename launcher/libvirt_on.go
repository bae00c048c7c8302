//go:build libvirt

package main

import "github.com/virtplane/terraform-provider-virtplane/launcher/internal/virt"

// withLibvirt reports whether this binary links libvirt.
const withLibvirt = true

func openLibvirt(uri string, opts virt.Options) (libvirtConn, error) {
	conn, err := virt.Open(uri, opts)
	if err != nil {
		// Not conn: a nil *virt.Connection in the interface is not nil.
		return nil, err
	}
	return conn, nil
}
