package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// Base is the image file a volume is made from.
type Base struct {
	Path, Format string
	VirtualSize  int64
	// SHA256 names the pool's copy: the same content is imported once
	// per pool, whatever the image is called on each node.
	SHA256 string
}

// SecretUsage is the usage name of the libvirt secret holding class's
// key on every node (the launchers define it; disks refer to it).
func SecretUsage(class string) string { return "virtplane-" + class }

// CreateRBD makes persistent volume vol of the VM (or bare instance)
// with uid owner on rbd class c, which the caller found missing (a
// volume found smaller than its size is grown with Conn.Resize): a clone
// of base's image, imported into the pool first if it is not there yet
// (O(1) whatever the image's size: RBD layering), or a blank image; then
// grown to size. One made meanwhile (another node, an earlier pass) is
// taken as it is. node names the import's temporary image. It returns
// the volume's image name.
func (c *Class) CreateRBD(ctx context.Context, owner, vol string, size int64, base *Base, node string) (string, error) {
	conn := c.Conn
	image := ceph.VolumeImage(owner, vol)
	if base == nil {
		if err := conn.Create(ctx, image, size); err != nil && !errors.Is(err, ceph.ErrExists) {
			return "", fmt.Errorf("creating %s/%s: %w", conn.Pool, image, err)
		}
		return image, nil
	}
	parent := ceph.BaseImage(base.SHA256)
	if _, err := conn.Info(ctx, parent); errors.Is(err, ceph.ErrNotFound) {
		if err := conn.Import(ctx, base.Path, base.Format, base.VirtualSize, parent, parent+".tmp-"+node); err != nil {
			return "", fmt.Errorf("importing %s into pool %s: %w", base.Path, conn.Pool, err)
		}
	} else if err != nil {
		return "", err
	}
	// A crash between the clone and the resize leaves a volume of the
	// image's size, which the next start grows (the caller finds it
	// smaller than its size).
	if err := conn.Clone(ctx, parent, ceph.BaseSnap, image); err != nil && !errors.Is(err, ceph.ErrExists) {
		return "", fmt.Errorf("cloning %s/%s@%s: %w", conn.Pool, parent, ceph.BaseSnap, err)
	}
	if size > base.VirtualSize {
		if err := c.GrowRBD(ctx, image, size); err != nil {
			return "", err
		}
	}
	return image, nil
}

// GrowRBD grows image on rbd class c to size bytes (never shrinks it).
func (c *Class) GrowRBD(ctx context.Context, image string, size int64) error {
	if err := c.Conn.Resize(ctx, image, size); err != nil {
		return fmt.Errorf("growing %s/%s to %d bytes: %w", c.Conn.Pool, image, size, err)
	}
	return nil
}

// RBDDisk is the launcher's description of image on rbd class c.
func (c *Class) RBDDisk(image string) *launcherpb.RBDDisk {
	r := c.RBD()
	return &launcherpb.RBDDisk{Monitors: r.GetMonitors(), Pool: r.GetPool(), Image: image, User: r.GetUser(), SecretUsage: SecretUsage(c.Name),
		ConfigFile: c.ConfFile}
}

// Secret is the libvirt secret of rbd class c, for the launcher to define.
func (c *Class) Secret() *launcherpb.CephSecret {
	return &launcherpb.CephSecret{Usage: SecretUsage(c.Name), Key: c.RBD().GetKey()}
}
