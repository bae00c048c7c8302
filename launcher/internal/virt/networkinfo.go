package virt

// NetworkInfo is an active libvirt network as list-networks reports it.
type NetworkInfo struct {
	Name string
	// Bridge is the Linux bridge libvirt made for the network; empty for
	// a network without one (macvtap or hostdev forwarding).
	Bridge string
}
