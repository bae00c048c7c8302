package ceph

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Import copies a local image file (qcow2 or raw) into the pool as
// image, with the protected snapshot BaseSnap that volumes are cloned
// from. The copy is made under tmp (a name unique to the caller) and
// renamed when complete, so a crash never leaves a half-copied base under
// the real name; when another node imported the same image first, the
// rename finds it and the copy is dropped. virtualSize is the file's
// virtual size (qemu-img info).
func (c *Conn) Import(ctx context.Context, src, format string, virtualSize int64, image, tmp string) error {
	_ = c.Remove(ctx, tmp) // a crash's leftover
	if err := c.Create(ctx, tmp, virtualSize); err != nil {
		return fmt.Errorf("creating %s: %w", c.spec(tmp), err)
	}
	ok := false
	defer func() {
		if !ok {
			// Never left behind: snapshots first, or rm refuses.
			_ = c.SnapUnprotect(context.WithoutCancel(ctx), tmp, BaseSnap)
			_ = c.SnapRemove(context.WithoutCancel(ctx), tmp, BaseSnap)
			_ = c.Remove(context.WithoutCancel(ctx), tmp)
		}
	}()
	args := []string{"convert", "-n", "-f", format,
		"--object", "secret,id=sec0,format=base64,file=" + c.KeyFile,
		"--target-image-opts", src, c.qemuTarget(tmp, "sec0")}
	if _, err := c.exec(ctx, "qemu-img", args...); err != nil {
		return fmt.Errorf("copying %s into %s: %w", src, c.spec(tmp), err)
	}
	if err := c.SnapCreate(ctx, tmp, BaseSnap); err != nil {
		return err
	}
	if err := c.SnapProtect(ctx, tmp, BaseSnap); err != nil {
		return err
	}
	err := c.Rename(ctx, tmp, image)
	if errors.Is(err, ErrExists) {
		return nil // imported meanwhile by another node: same content
	}
	if err != nil {
		return err
	}
	ok = true
	return nil
}

// qemuTarget is the --target-image-opts of image: QEMU's rbd driver with
// the class's monitors and user, the key given as secret id secret.
// Values are the API's validated names and IP literals: no ',' to escape.
func (c *Conn) qemuTarget(image, secret string) string {
	opts := []string{"driver=raw", "file.driver=rbd", "file.pool=" + c.Pool, "file.image=" + image,
		"file.user=" + c.User, "file.key-secret=" + secret}
	for i, m := range c.Monitors {
		ap, err := netip.ParseAddrPort(m)
		if err != nil {
			continue // the API allows only IP:port
		}
		p := "file.server." + strconv.Itoa(i) + "."
		opts = append(opts, p+"host="+ap.Addr().String(), p+"port="+strconv.Itoa(int(ap.Port())))
	}
	return strings.Join(opts, ",")
}
