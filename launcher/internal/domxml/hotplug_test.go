package domxml

import (
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// liveDomain is a running domain's XML as libvirt gives it, reduced to
// what hotplug looks at: a virtio root disk, a scsi controller only when
// scsi, and a plugged disk vdc (vdb was unplugged).
func liveDomain(scsi bool) string {
	x := `<domain type='qemu'><name>d</name><devices>
  <disk type='file' device='disk'><source file='/v/root.qcow2'/><target dev='vda' bus='virtio'/><alias name='ua-disk-root'/>
    <address type='pci' domain='0x0000' bus='0x03' slot='0x00' function='0x0'/></disk>
  <disk type='file' device='disk'><source file='/v/hot2.qcow2'/><target dev='vdc' bus='virtio'/><alias name='ua-disk-hot2'/>
    <address type='pci' domain='0x0000' bus='0x07' slot='0x00' function='0x0'/></disk>
  <controller type='pci' index='0' model='pcie-root'/>`
	if scsi {
		x += `<controller type='scsi' index='0' model='virtio-scsi'><alias name='scsi0'/></controller>
  <disk type='file' device='disk'><source file='/v/s.qcow2'/><target dev='sda' bus='scsi'/><alias name='ua-disk-s'/></disk>`
	}
	return x + `</devices></domain>`
}

func TestHotplugDisk(t *testing.T) {
	src := &launcherpb.DiskSource{Name: "hot3", Path: "/v/hot3.qcow2", Format: "qcow2", Hotpluggable: true}
	disk, needSCSI, err := HotplugDisk(src, liveDomain(false))
	if err != nil {
		t.Fatal(err)
	}
	// vdb is free again: the gap an unplug left is taken.
	if disk.Target.Dev != "vdb" || disk.Target.Bus != "virtio" || needSCSI {
		t.Errorf("target %+v, needSCSI %v; want vdb on virtio", disk.Target, needSCSI)
	}
	if disk.Alias == nil || disk.Alias.Name != "ua-disk-hot3" || disk.Serial != "hot3" {
		t.Errorf("alias %+v serial %q; want ua-disk-hot3 and the name as serial", disk.Alias, disk.Serial)
	}
	if disk.Source.File == nil || disk.Source.File.File != "/v/hot3.qcow2" || disk.Driver.Type != "qcow2" {
		t.Errorf("source %+v driver %+v", disk.Source, disk.Driver)
	}

	src.Bus, src.Serial = "scsi", "S-1"
	disk, needSCSI, err = HotplugDisk(src, liveDomain(false))
	if err != nil || disk.Target.Dev != "sda" || !needSCSI || disk.Serial != "S-1" {
		t.Errorf("scsi without a controller: %+v %v %q %v", disk.Target, needSCSI, disk.Serial, err)
	}
	disk, needSCSI, err = HotplugDisk(src, liveDomain(true))
	if err != nil || disk.Target.Dev != "sdb" || needSCSI {
		t.Errorf("scsi with a controller and sda: %+v %v %v", disk.Target, needSCSI, err)
	}

	// A long name is clipped to what a serial holds; a disk that is not
	// hotpluggable gets no serial it was not given.
	long := &launcherpb.DiskSource{Name: "a-rather-long-volume-name-here", Path: "/v/x", Hotpluggable: true}
	if d, _, _ := HotplugDisk(long, liveDomain(false)); d.Serial != "a-rather-long-volume" {
		t.Errorf("serial of a long name: %q", d.Serial)
	}
	if s := diskSerial(&launcherpb.DiskSource{Name: "plain"}); s != "" {
		t.Errorf("a plain disk's serial: %q", s)
	}

	for name, bad := range map[string]*launcherpb.DiskSource{
		"cdrom":      {Name: "cd", Path: "/v/cd.iso", Device: "cdrom"},
		"boot order": {Name: "b", Path: "/v/b", BootOrder: 1},
		"relative":   {Name: "r", Path: "v/r"},
	} {
		if _, _, err := HotplugDisk(bad, liveDomain(false)); err == nil {
			t.Errorf("%s: plugged", name)
		}
	}
}

func TestWithHotplugPorts(t *testing.T) {
	// Two root ports, one holding a disk (bus 1), one free (bus 2).
	def := `<domain type='qemu'><name>d</name><devices>
  <disk type='file' device='disk'><target dev='vda' bus='virtio'/><address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/></disk>
  <controller type='pci' index='0' model='pcie-root'/>
  <controller type='pci' index='1' model='pcie-root-port'><address type='pci' domain='0x0000' bus='0x00' slot='0x01' function='0x0'/></controller>
  <controller type='pci' index='2' model='pcie-root-port'><address type='pci' domain='0x0000' bus='0x00' slot='0x01' function='0x1'/></controller>
</devices></domain>`
	out, added, err := WithHotplugPorts(def, 4)
	if err != nil {
		t.Fatal(err)
	}
	if added != 3 {
		t.Fatalf("added %d ports, want 3 (one of the two is free)", added)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(out); err != nil {
		t.Fatal(err)
	}
	ports := 0
	for _, c := range d.Devices.Controllers {
		if c.Model == "pcie-root-port" {
			ports++
		}
	}
	if ports != 5 || len(d.Devices.Disks) != 1 || d.Devices.Disks[0].Address.PCI == nil {
		t.Fatalf("ports %d, disks %+v", ports, d.Devices.Disks)
	}
	// Enough free already, or no PCIe: unchanged.
	if again, n, err := WithHotplugPorts(out, 4); err != nil || n != 0 || again != out {
		t.Errorf("with four free: added %d (%v)", n, err)
	}
	pc := `<domain type='qemu'><name>d</name><devices><controller type='pci' index='0' model='pci-root'/></devices></domain>`
	if again, n, err := WithHotplugPorts(pc, 4); err != nil || n != 0 || again != pc {
		t.Errorf("pc machine: added %d (%v)", n, err)
	}
}

// A destination defined from the spec (disks in spec order, targets and
// addresses libvirt gave them afresh) takes the running source's layout:
// the disk plugged later keeps its target and address, the scsi
// controller plugged with it is there, the interface's address follows.
func TestDestinationXMLTakesTheSourcesLayout(t *testing.T) {
	src := `<domain type='qemu'><name>d</name><devices>
  <disk type='file' device='disk'><source file='/a/root.qcow2'/><target dev='vda' bus='virtio'/><alias name='ua-disk-root'/>
    <address type='pci' domain='0x0000' bus='0x03' slot='0x00' function='0x0'/></disk>
  <disk type='file' device='disk'><source file='/a/s.qcow2'/><target dev='sda' bus='scsi'/><alias name='ua-disk-s'/>
    <address type='drive' controller='0' bus='0' target='0' unit='0'/></disk>
  <disk type='file' device='disk'><source file='/a/hot.qcow2'/><target dev='vdc' bus='virtio'/><alias name='ua-disk-hot'/>
    <address type='pci' domain='0x0000' bus='0x07' slot='0x00' function='0x0'/></disk>
  <controller type='pci' index='0' model='pcie-root'><alias name='pcie.0'/></controller>
  <controller type='scsi' index='0' model='virtio-scsi'><alias name='scsi0'/><address type='pci' domain='0x0000' bus='0x06' slot='0x00' function='0x0'/></controller>
  <interface type='user'><mac address='52:54:00:00:00:01'/><alias name='ua-net-default'/><address type='pci' domain='0x0000' bus='0x01' slot='0x00' function='0x0'/></interface>
</devices></domain>`
	dest := `<domain type='qemu'><name>d</name><devices>
  <disk type='file' device='disk'><source file='/b/root.qcow2'/><target dev='vda' bus='virtio'/><alias name='ua-disk-root'/>
    <address type='pci' domain='0x0000' bus='0x04' slot='0x00' function='0x0'/></disk>
  <disk type='file' device='disk'><source file='/b/hot.qcow2'/><target dev='vdb' bus='virtio'/><alias name='ua-disk-hot'/>
    <address type='pci' domain='0x0000' bus='0x05' slot='0x00' function='0x0'/></disk>
  <disk type='file' device='disk'><source file='/b/s.qcow2'/><target dev='sda' bus='scsi'/><alias name='ua-disk-s'/>
    <address type='drive' controller='0' bus='0' target='0' unit='0'/></disk>
  <controller type='pci' index='0' model='pcie-root'/>
  <controller type='scsi' index='0' model='virtio-scsi'><address type='pci' domain='0x0000' bus='0x02' slot='0x00' function='0x0'/></controller>
  <interface type='user'><mac address='52:54:00:00:00:01'/><alias name='ua-net-default'/><address type='pci' domain='0x0000' bus='0x03' slot='0x00' function='0x0'/></interface>
</devices></domain>`
	out, err := DestinationXML(dest, src)
	if err != nil {
		t.Fatal(err)
	}
	var d libvirtxml.Domain
	if err := d.Unmarshal(out); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, disk := range d.Devices.Disks {
		got = append(got, disk.Alias.Name+"="+disk.Target.Dev+"@"+disk.Source.File.File)
	}
	want := "ua-disk-root=vda@/b/root.qcow2 ua-disk-s=sda@/b/s.qcow2 ua-disk-hot=vdc@/b/hot.qcow2"
	if strings.Join(got, " ") != want {
		t.Errorf("disks %v\nwant %s (the source's order and targets, the destination's files)", got, want)
	}
	if a := d.Devices.Disks[2].Address.PCI; a == nil || *a.Bus != 7 {
		t.Errorf("the plugged disk's address %+v, want bus 7", d.Devices.Disks[2].Address)
	}
	if a := d.Devices.Controllers[1].Address.PCI; a == nil || *a.Bus != 6 || d.Devices.Controllers[1].Alias != nil {
		t.Errorf("scsi controller %+v, want the source's address without libvirt's alias", d.Devices.Controllers[1])
	}
	if a := d.Devices.Interfaces[0].Address.PCI; a == nil || *a.Bus != 1 {
		t.Errorf("interface address %+v, want bus 1", d.Devices.Interfaces[0].Address)
	}

	// A disk on one side only is a hotplug under way: refused, named.
	half := strings.Replace(dest, `<alias name='ua-disk-hot'/>`, `<alias name='ua-disk-other'/>`, 1)
	if _, err := DestinationXML(half, src); err == nil || !strings.Contains(err.Error(), "disk hot (vdc)") {
		t.Errorf("a disk the destination lacks: %v", err)
	}
}

// TestDiskNameOfAlias: DiskName reads back what DiskAlias wrote, and
// nothing from an alias that is no VMI disk's.
func TestDiskNameOfAlias(t *testing.T) {
	for _, name := range []string{"data", "hot-1", "a_b"} {
		if got, ok := DiskName(DiskAlias(name)); !ok || got != name {
			t.Errorf("DiskName(DiskAlias(%q)) = %q, %v", name, got, ok)
		}
	}
	for _, a := range []string{"ua-net-default", "ua-disk-", "virtio-disk0", ""} {
		if got, ok := DiskName(a); ok {
			t.Errorf("DiskName(%q) = %q, want none", a, got)
		}
	}
}
