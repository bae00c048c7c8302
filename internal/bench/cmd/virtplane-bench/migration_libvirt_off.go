//go:build !libvirt

package main

func openNodeLibvirt(string) (nodeConn, error) { return nil, errNoLibvirt }
