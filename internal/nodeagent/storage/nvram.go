package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
)

// ProvisionNVRAM makes the EFI variable store of the VM (or bare
// instance) with uid owner on rbd class c unless it exists: an image
// holding template, the VARS template of the firmware libvirt boots the
// guest with (libvirt fills a file NVRAM from it, never a network one).
// An existing store is the guest's variables and is used as it is. node
// names the import's temporary image. It returns the image's name.
func (c *Class) ProvisionNVRAM(ctx context.Context, owner, template, node string) (string, error) {
	image := ceph.NVRAMImage(owner)
	_, err := c.Conn.Info(ctx, image)
	switch {
	case err == nil:
		return image, nil
	case !errors.Is(err, ceph.ErrNotFound):
		return "", err
	}
	if err := c.Conn.ImportRaw(ctx, template, image, image+".tmp-"+node); err != nil {
		return "", fmt.Errorf("importing the NVRAM template %s into pool %s: %w", template, c.Conn.Pool, err)
	}
	return image, nil
}
