package driver

import (
	"errors"
	"fmt"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/bridgevlan"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/neighbours"
)

// netSpec is what the launcher applies to a running domain's interfaces
// beyond its libvirt definition, which cannot say it on Debian 12's
// libvirt 9.0: the port forwards of user interfaces (no hostfwd for
// slirp; passt is not available) and the VLAN of bridge interfaces
// (<vlan> is for Open vSwitch only). It comes from the VMI of the last
// Sync or Incoming.
type netSpec struct {
	forwards []ifaceForwards
	vlans    []ifaceVLAN
}

type ifaceForwards struct {
	iface    string
	forwards []forward
}

type ifaceVLAN struct {
	iface  string
	bridge string
	vid    int
}

func (n *netSpec) empty() bool { return n == nil || len(n.forwards) == 0 && len(n.vlans) == 0 }

// netSpecOf reads spec's interfaces, in order.
func netSpecOf(spec *apiv1.VirtualMachineInstanceSpec) (*netSpec, error) {
	networks := map[string]*apiv1.Network{}
	for _, n := range spec.GetNetworks() {
		networks[n.GetName()] = n
	}
	ns := &netSpec{}
	for _, iface := range spec.GetDomain().GetDevices().GetInterfaces() {
		n := networks[iface.GetName()]
		if u := n.GetUser(); u != nil && len(u.GetPortForwards()) > 0 {
			fw := ifaceForwards{iface: iface.GetName()}
			for _, pf := range u.GetPortForwards() {
				f, err := forwardOf(pf)
				if err != nil {
					return nil, fmt.Errorf("interface %s: %w", iface.GetName(), err)
				}
				fw.forwards = append(fw.forwards, f)
			}
			ns.forwards = append(ns.forwards, fw)
		}
		if b := n.GetBridge(); b != nil && b.GetVlan() > 0 {
			ns.vlans = append(ns.vlans, ifaceVLAN{iface: iface.GetName(), bridge: b.GetBridge(), vid: int(b.GetVlan())})
		}
	}
	return ns, nil
}

// setNetSpec records the network of vmi for this launcher's domain.
func (d *Driver) setNetSpec(spec *apiv1.VirtualMachineInstanceSpec) error {
	ns, err := netSpecOf(spec)
	if err != nil {
		return err
	}
	d.netMu.Lock()
	d.net = ns
	d.netMu.Unlock()
	return nil
}

// netSteps says which parts applyNetwork does.
type netSteps struct {
	vlans, forwards bool
}

var allNetSteps = netSteps{vlans: true, forwards: true}

// applyNetwork puts the running dom's bridge taps on their VLANs and
// adds its port forwards, each only if not done yet: it runs after every
// start, when a migrated-in domain starts (VLANs: its tap exists, the
// guest is still paused) and resumes (forwards: slirp's own state came
// with the guest, but QEMU on this host listens on nothing yet), and when
// a launcher comes back to a running domain. A domain that is not
// running is left alone.
func (d *Driver) applyNetwork(dom Domain, steps netSteps) error {
	d.netMu.Lock()
	defer d.netMu.Unlock()
	ns := d.net
	if ns.empty() || (!steps.vlans || len(ns.vlans) == 0) && (!steps.forwards || len(ns.forwards) == 0) {
		return nil
	}
	st, _, err := dom.GetState()
	if err != nil {
		return fmt.Errorf("get domain state: %w", err)
	}
	if !st.Active() {
		return nil
	}
	x, err := dom.GetXMLDesc()
	if err != nil {
		return fmt.Errorf("read the live domain XML: %w", err)
	}
	live, err := domxml.ParseLiveNetwork(x)
	if err != nil {
		return err
	}
	pid := d.qemuPid()
	var errs []error
	if steps.vlans {
		for _, v := range ns.vlans {
			li := live.Interface(v.iface)
			switch {
			case li == nil || li.Tap == "":
				errs = append(errs, fmt.Errorf("interface %s: VLAN %d: the running domain has no tap for it", v.iface, v.vid))
			case pid == 0:
				errs = append(errs, fmt.Errorf("interface %s: VLAN %d: QEMU's process is unknown (no %s.pid in %s)", v.iface, v.vid, d.cfg.DomainName, d.cfg.QEMUPidDir))
			default:
				if err := d.cfg.SetVLAN(pid, v.bridge, li.Tap, v.vid); err != nil {
					errs = append(errs, fmt.Errorf("interface %s: %w", v.iface, err))
				}
			}
		}
	}
	if steps.forwards && len(ns.forwards) > 0 {
		nd, ok := dom.(NetworkDomain)
		if !ok {
			return errors.New("port forwards: this libvirt domain has no QEMU monitor")
		}
		for _, fw := range ns.forwards {
			li := live.Interface(fw.iface)
			if li == nil || li.Kind != domxml.KindUser || li.Alias == "" {
				errs = append(errs, fmt.Errorf("interface %s: the running domain has no user interface of that name for its port forwards", fw.iface))
				continue
			}
			if err := ensureForwards(nd, domxml.NetdevID(li.Alias), fw.forwards, pid); err != nil {
				errs = append(errs, fmt.Errorf("interface %s: %w", fw.iface, err))
			}
		}
	}
	return errors.Join(errs...)
}

// SetAccessVLAN is Config.SetVLAN's default: the tap becomes an access
// port of vid on bridge, in the network namespace of QEMU's process pid
// (where libvirt made the tap; a node's libvirtd may run in a namespace
// other than the launcher's).
func SetAccessVLAN(pid int, bridge, tap string, vid int) error {
	p, err := bridgevlan.OpenForPid(pid)
	if err != nil {
		return err
	}
	defer p.Close()
	return p.SetAccess(bridge, tap, vid)
}

// ReadNeighbours is Config.Neighbours's default: the neighbour table of
// QEMU's network namespace (package neighbours says why not libvirt's
// ARP source).
func ReadNeighbours(pid int) ([]GuestInterface, error) {
	entries, err := neighbours.ForPid(pid)
	if err != nil {
		return nil, err
	}
	out := make([]GuestInterface, len(entries))
	for i, e := range entries {
		out[i] = GuestInterface{MAC: e.MAC, Addrs: e.Addrs}
	}
	return out, nil
}
