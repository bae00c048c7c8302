//go:build libvirt

package virt

import (
	"errors"
	"fmt"
	"sort"

	"libvirt.org/go/libvirt"
)

// ListNetworks returns the active libvirt networks, by name. Inactive
// ones are left out: a guest cannot be attached to them.
func (c *Connection) ListNetworks() ([]NetworkInfo, error) {
	conn, err := c.current()
	if err != nil {
		return nil, err
	}
	defer release(conn)
	nets, err := conn.ListAllNetworks(libvirt.CONNECT_LIST_NETWORKS_ACTIVE)
	if err != nil {
		return nil, fmt.Errorf("listing networks: %w", c.wrap(conn, err))
	}
	out := make([]NetworkInfo, 0, len(nets))
	var errs []error
	for i := range nets {
		n := &nets[i]
		info, err := networkInfo(n)
		_ = n.Free()
		if err != nil {
			// One network that vanished between list and query does not
			// hide the others; any other failure is reported.
			if isCode(err, libvirt.ERR_NO_NETWORK) {
				continue
			}
			errs = append(errs, c.wrap(conn, err))
			continue
		}
		out = append(out, info)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("reading networks: %w", errors.Join(errs...))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func networkInfo(n *libvirt.Network) (NetworkInfo, error) {
	name, err := n.GetName()
	if err != nil {
		return NetworkInfo{}, err
	}
	bridge, err := n.GetBridgeName()
	if err != nil {
		// Networks that forward by macvtap or hostdev have no bridge:
		// libvirt says so with an internal error; a vanished network or a
		// lost connection is a failure.
		if isCode(err, libvirt.ERR_INTERNAL_ERROR) {
			return NetworkInfo{Name: name}, nil
		}
		return NetworkInfo{}, err
	}
	return NetworkInfo{Name: name, Bridge: bridge}, nil
}

func isCode(err error, code libvirt.ErrorNumber) bool {
	var lerr libvirt.Error
	return errors.As(err, &lerr) && lerr.Code == code
}
