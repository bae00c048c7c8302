package ceph

import (
	"context"
	"fmt"
	"time"
)

// ExportTimeout bounds one copy of an image out of the pool (a VM
// export's file): long, as a volume may be large; the export's end
// cancels it sooner.
const ExportTimeout = 6 * time.Hour

// ExportTo copies image as it is now into the file dst, as format (raw:
// a sparse file; qcow2), through qemu-img's rbd driver, read-only, the
// key given from the key file (never on the command line).
func (c *Conn) ExportTo(ctx context.Context, image, dst, format string) error {
	cc := *c
	cc.Timeout = ExportTimeout
	args := []string{"convert", "-q",
		"--object", "secret,id=sec0,format=base64,file=" + c.KeyFile,
		"--image-opts", c.qemuTarget(image, "sec0"),
		"-O", format, dst}
	if _, err := cc.exec(ctx, "qemu-img", args...); err != nil {
		return fmt.Errorf("copying %s out: %w", c.spec(image), err)
	}
	return nil
}
