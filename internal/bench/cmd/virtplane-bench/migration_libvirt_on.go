//go:build libvirt

package main

import "github.com/virtplane/terraform-provider-virtplane/internal/bench/virt"

func openNodeLibvirt(uri string) (nodeConn, error) {
	conn, err := virt.Open(uri)
	if err != nil {
		// Not conn: a nil *virt.Conn in the interface is not nil.
		return nil, err
	}
	return conn, nil
}
