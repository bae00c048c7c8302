package ceph

import (
	"context"
	"errors"
	"fmt"
)

// ImportRaw copies a raw local file into the pool as image, of the
// file's size (an EFI variable store from its firmware's VARS template:
// QEMU's flash device needs exactly that size). The copy is made under
// tmp (a name unique to the caller) and renamed when complete, so a crash
// never leaves a half-copied store under the real name; when image exists
// by then (made by another node meanwhile), the copy is dropped and image
// kept as it is.
func (c *Conn) ImportRaw(ctx context.Context, src, image, tmp string) error {
	_ = c.Remove(ctx, tmp) // a crash's leftover
	ok := false
	defer func() {
		if !ok {
			_ = c.Remove(context.WithoutCancel(ctx), tmp)
		}
	}()
	if _, err := c.run(ctx, "rbd", "import", "--no-progress", src, c.spec(tmp)); err != nil {
		return fmt.Errorf("importing %s into %s: %w", src, c.spec(tmp), err)
	}
	err := c.Rename(ctx, tmp, image)
	if errors.Is(err, ErrExists) {
		return nil // made meanwhile: that one holds the guest's variables
	}
	if err != nil {
		return err
	}
	ok = true
	return nil
}
