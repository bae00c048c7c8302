//go:build !libvirt

package main

import "errors"

// errNoLibvirt is why a benchmark built without the libvirt tag cannot run.
var errNoLibvirt = errors.New("built without libvirt support: build with -tags libvirt / make bench")

func openLibvirt(string) (libvirtConn, error) { return nil, errNoLibvirt }
