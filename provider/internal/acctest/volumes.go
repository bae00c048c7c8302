package acctest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// VolumeSize is the virtual size (qemu-img info) of persistent volume
// volume of the VM whose uid is vmUID, on the real node; ok is false
// without real nodes.
func (n *Nodes) VolumeSize(ctx context.Context, vmUID, volume string) (bytes int64, ok bool, err error) {
	if n.host == nil {
		return 0, false, nil
	}
	dir, err := nodedir.Layout{Root: n.host.nodeDir}.VMDir(vmUID)
	if err != nil {
		return 0, true, err
	}
	path, err := nodedir.FileIn(nodedir.VolumesDir(dir), volume+".qcow2")
	if err != nil {
		return 0, true, err
	}
	if _, err := os.Stat(path); err != nil {
		return 0, true, err
	}
	// -U: the running guest's QEMU holds the file's lock.
	out, err := exec.CommandContext(ctx, "qemu-img", "info", "-U", "--output=json", path).Output()
	if err != nil {
		return 0, true, fmt.Errorf("qemu-img info %s: %w", path, err)
	}
	var info struct {
		VirtualSize int64 `json:"virtual-size"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return 0, true, fmt.Errorf("qemu-img info %s: %w", path, err)
	}
	return info.VirtualSize, true, nil
}

// WaitDiskSize waits until the guest of VMI uid, booted with
// testguest.DiskSize(dev), reports that it sees bytes as dev's size (its
// last testguest.MarkerDiskSize line); without real nodes it returns at
// once.
func (n *Nodes) WaitDiskSize(tb testing.TB, uid, dev string, bytes int64) {
	tb.Helper()
	if n.host == nil {
		return
	}
	dir, err := nodedir.Layout{Root: n.host.nodeDir}.VMIDir(uid)
	if err != nil {
		tb.Fatal(err)
	}
	path := nodedir.ConsoleLogPath(dir)
	testutil.EventuallyNoError(tb, GuestBootTimeout, fmt.Sprintf("the guest of VMI %s to see %s as %d bytes", uid, dev, bytes), func() error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sizes := testguest.DiskSizes(string(b), dev)
		if len(sizes) == 0 || sizes[len(sizes)-1] != bytes {
			return fmt.Errorf("sizes it reported: %v", sizes)
		}
		return nil
	})
}

// WaitGuestDisk waits until the guest of VMI uid, booted with
// testguest.BlockWatch(), has (present) or no longer has a disk of serial
// (testguest.BlockDevices); without real nodes it returns at once.
func (n *Nodes) WaitGuestDisk(tb testing.TB, uid, serial string, present bool) {
	tb.Helper()
	if n.host == nil {
		return
	}
	dir, err := nodedir.Layout{Root: n.host.nodeDir}.VMIDir(uid)
	if err != nil {
		tb.Fatal(err)
	}
	path := nodedir.ConsoleLogPath(dir)
	testutil.EventuallyNoError(tb, GuestBootTimeout, fmt.Sprintf("the guest of VMI %s to have disk %s: %v", uid, serial, present), func() error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		now, _, _ := testguest.BlockDevices(string(b))
		if _, ok := testguest.BlockBySerial(now, serial); ok != present {
			return fmt.Errorf("the guest's disks: %v", now)
		}
		return nil
	})
}
