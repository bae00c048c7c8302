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
	disks, size, err := localDisks(x)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(disks, []string{"vda", "vdc"}) || size != 128<<20 {
		t.Fatalf("localDisks = %v, %d; want the two writable disks and 128 MiB", disks, size)
	}
	if _, _, err := localDisks("<domain"); err == nil {
		t.Fatal("bad XML accepted")
	}
}
