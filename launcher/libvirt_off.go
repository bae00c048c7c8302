//go:build !libvirt

package main

import "github.com/virtplane/terraform-provider-virtplane/launcher/internal/virt"

// withLibvirt reports whether this binary links libvirt.
const withLibvirt = false

func openLibvirt(string, virt.Options) (libvirtConn, error) { return nil, errNoLibvirt }
