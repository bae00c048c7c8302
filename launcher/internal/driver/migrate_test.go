package driver

import (
	"slices"
	"testing"
)

func TestLocalDisks(t *testing.T) {
	x := `<domain type="qemu"><name>d</name><memory unit="KiB">131072</memory><devices>
<disk type="file" device="disk"><source file="/nonexistent/root.qcow2"/><target dev="vda" bus="virtio"/></disk>
<disk type="file" device="disk"><source file="/nonexistent/ro.qcow2"/><target dev="vdb" bus="virtio"/><readonly/></disk>
<disk type="file" device="cdrom"><source file="/nonexistent/seed.iso"/><target dev="sda" bus="sata"/><readonly/></disk>
<disk type="file" device="disk"><source file="/nonexistent/data.qcow2"/><target dev="vdc" bus="virtio"/></disk>
</devices></domain>`
	disks, size, _, err := localDisks(x)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(disks, []string{"vda", "vdc"}) || size != 128<<20 {
		t.Fatalf("localDisks = %v, %d; want the two writable disks and 128 MiB", disks, size)
	}
	// Network (rbd) disks and files on a shared filesystem stay put.
	x = `<domain type="qemu"><name>d</name><memory unit="KiB">131072</memory>
<metadata><vmi xmlns="https://virtplane.io/xmlns/domain/1"><uid>u</uid><sharedDisk>data</sharedDisk></vmi></metadata><devices>
<disk type="network" device="disk"><source protocol="rbd" name="vp/img"><host name="10.0.0.1" port="3300"/></source><target dev="vda" bus="virtio"/><alias name="ua-disk-root"/></disk>
<disk type="file" device="disk"><source file="/nonexistent/data.qcow2"/><target dev="vdb" bus="virtio"/><alias name="ua-disk-data"/></disk>
<disk type="file" device="disk"><source file="/nonexistent/scratch.qcow2"/><target dev="vdc" bus="virtio"/><alias name="ua-disk-scratch"/></disk>
</devices></domain>`
	if disks, _, shared, err := localDisks(x); err != nil || !shared || !slices.Equal(disks, []string{"vdc"}) {
		t.Fatalf("localDisks with rbd and shared disks = %v, %v; want only vdc", disks, err)
	}
	if _, _, _, err := localDisks("<domain"); err == nil {
		t.Fatal("bad XML accepted")
	}
}
