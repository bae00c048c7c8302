package storage

import (
	"context"
	"errors"
	"fmt"

	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
)

// ProvisionNVRAM makes the EFI variable store of the VM (or bare
// instance) with uid owner on rbd class c unless it exists: an image
// holding the VARS template of the firmware libvirt boots the guest with
// (libvirt fills a file NVRAM from it, never a network one), which
// template names; it is asked only when the store is made, so that a
// start that finds the guest's variables reads no firmware descriptors.
// An existing store is the guest's variables and is used as it is. node
// names the import's temporary image. It returns the image's name.
func (c *Class) ProvisionNVRAM(ctx context.Context, owner string, template func(context.Context) (string, error), node string) (string, error) {
	image := ceph.NVRAMImage(owner)
	_, err := c.Conn.Info(ctx, image)
	switch {
	case err == nil:
		return image, nil
	case !errors.Is(err, ceph.ErrNotFound):
		return "", err
	}
	path, err := template(ctx)
	if err != nil {
		return "", err
	}
	if err := c.Conn.ImportRaw(ctx, path, image, image+".tmp-"+node); err != nil {
		return "", fmt.Errorf("importing the NVRAM template %s into pool %s: %w", path, c.Conn.Pool, err)
	}
	return image, nil
}
