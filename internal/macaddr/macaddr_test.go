package macaddr

import (
	"net"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func ifaces(macs ...string) *apiv1.VirtualMachineInstanceSpec {
	spec := &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Devices: &apiv1.Devices{}}}
	for i, m := range macs {
		spec.Domain.Devices.Interfaces = append(spec.Domain.Devices.Interfaces,
			&apiv1.Interface{Name: string(rune('a' + i)), MacAddress: m})
	}
	return spec
}

// A MAC is generated once: kept by interface name across an update that
// leaves it out, never one the VM already uses, always unicast and
// locally administered; a given one is left alone.
func TestAssign(t *testing.T) {
	created := ifaces("", "02:00:00:00:00:01")
	Assign(created, nil)
	a := created.Domain.Devices.Interfaces[0].MacAddress
	hw, err := net.ParseMAC(a)
	if err != nil || hw[0]&0x01 != 0 || hw[0]&0x02 == 0 {
		t.Fatalf("generated MAC %q (%v): want a unicast, locally administered address", a, err)
	}
	if got := created.Domain.Devices.Interfaces[1].MacAddress; got != "02:00:00:00:00:01" {
		t.Fatalf("given MAC changed to %q", got)
	}

	update := ifaces("", "", "")
	Assign(update, created)
	got := update.Domain.Devices.Interfaces
	if got[0].MacAddress != a || got[1].MacAddress != "02:00:00:00:00:01" {
		t.Fatalf("update lost the stored MACs: %q, %q", got[0].MacAddress, got[1].MacAddress)
	}
	if got[2].MacAddress == "" || got[2].MacAddress == a || got[2].MacAddress == "02:00:00:00:00:01" {
		t.Fatalf("new interface got %q", got[2].MacAddress)
	}

	// A stored MAC now named by another interface is not handed out twice.
	clash := ifaces("", a)
	Assign(clash, created)
	if m := clash.Domain.Devices.Interfaces[0].MacAddress; m == a || m == "" {
		t.Fatalf("interface a got %q, which b names", m)
	}
}
