package ceph

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"
)

// spec is pool/image, or pool/image@snap.
func (c *Conn) spec(image string) string { return c.Pool + "/" + image }

func (c *Conn) snapSpec(image, snap string) string { return c.Pool + "/" + image + "@" + snap }

// Probe checks that the monitors answer, the key is accepted and the pool
// exists, by listing the pool: what a class needs to be usable.
func (c *Conn) Probe(ctx context.Context) error {
	_, err := c.run(ctx, "rbd", "ls", "--pool", c.Pool, "--format", "json")
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("pool %q does not exist: %w", c.Pool, err)
	}
	return err
}

// ProbeMessage says why a Probe failed, naming the class's field to look
// at: the one wording of the server's class status and the nodes'
// reports.
func ProbeMessage(err error) string {
	switch {
	case errors.Is(err, ErrUnreachable):
		return "no monitor answered (spec.rbd.monitors): " + err.Error()
	case errors.Is(err, ErrDenied):
		return "the monitors refused the user or key (spec.rbd.user, spec.rbd.key): " + err.Error()
	case errors.Is(err, ErrNotFound):
		return "the pool does not exist (spec.rbd.pool): " + err.Error()
	}
	return err.Error()
}

// ImageInfo is what `rbd info` says of an image.
type ImageInfo struct {
	Name string `json:"name"`
	// ID is the image's id, which a rename keeps.
	ID       string   `json:"id"`
	Size     int64    `json:"size"`
	Features []string `json:"features"`
	Parent   *struct {
		Pool     string `json:"pool"`
		Image    string `json:"image"`
		Snapshot string `json:"snapshot"`
	} `json:"parent"`
}

// Info reads an image's size, features and parent; ErrNotFound when it
// does not exist.
func (c *Conn) Info(ctx context.Context, image string) (*ImageInfo, error) {
	out, err := c.run(ctx, "rbd", "info", c.spec(image), "--format", "json")
	if err != nil {
		return nil, err
	}
	var info ImageInfo
	if err := json.Unmarshal(out, &info); err != nil {
		return nil, fmt.Errorf("rbd info %s: %w", c.spec(image), err)
	}
	return &info, nil
}

// List lists the pool's images.
func (c *Conn) List(ctx context.Context) ([]string, error) {
	out, err := c.run(ctx, "rbd", "ls", "--pool", c.Pool, "--format", "json")
	if err != nil {
		return nil, err
	}
	var names []string
	if err := json.Unmarshal(out, &names); err != nil {
		return nil, fmt.Errorf("rbd ls %s: %w", c.Pool, err)
	}
	return names, nil
}

// sizeArg is a size in bytes as rbd takes it.
func sizeArg(bytes int64) string { return strconv.FormatInt(bytes, 10) + "B" }

// Create makes a blank image of size bytes (with the pool's default
// features: layering, exclusive-lock among them).
func (c *Conn) Create(ctx context.Context, image string, bytes int64) error {
	_, err := c.run(ctx, "rbd", "create", c.spec(image), "--size", sizeArg(bytes))
	return err
}

// Resize grows an image to bytes; it never shrinks one (the API refuses
// smaller sizes; --allow-shrink is never passed).
func (c *Conn) Resize(ctx context.Context, image string, bytes int64) error {
	_, err := c.run(ctx, "rbd", "resize", c.spec(image), "--size", sizeArg(bytes))
	return err
}

// Rename renames an image within the pool; ErrExists when dst exists.
func (c *Conn) Rename(ctx context.Context, src, dst string) error {
	_, err := c.run(ctx, "rbd", "rename", c.spec(src), c.spec(dst))
	return err
}

// Remove deletes an image; a missing one is no error. ErrBusy while it
// has snapshots or a watcher (a running QEMU).
func (c *Conn) Remove(ctx context.Context, image string) error {
	_, err := c.run(ctx, "rbd", "rm", "--no-progress", c.spec(image))
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// SnapCreate makes a snapshot; ErrExists when it exists.
func (c *Conn) SnapCreate(ctx context.Context, image, snap string) error {
	_, err := c.run(ctx, "rbd", "snap", "create", "--no-progress", c.snapSpec(image, snap))
	return err
}

// SnapProtect protects a snapshot so that it can be cloned; protecting a
// protected one is no error.
func (c *Conn) SnapProtect(ctx context.Context, image, snap string) error {
	_, err := c.run(ctx, "rbd", "snap", "protect", c.snapSpec(image, snap))
	if errors.Is(err, ErrBusy) {
		return nil // EBUSY: already protected
	}
	return err
}

// SnapUnprotect lifts the protection; ErrBusy while clones remain.
func (c *Conn) SnapUnprotect(ctx context.Context, image, snap string) error {
	_, err := c.run(ctx, "rbd", "snap", "unprotect", c.snapSpec(image, snap))
	return err
}

// SnapRemove deletes a snapshot; a missing one is no error.
func (c *Conn) SnapRemove(ctx context.Context, image, snap string) error {
	_, err := c.run(ctx, "rbd", "snap", "rm", "--no-progress", c.snapSpec(image, snap))
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// Snap is one snapshot of an image.
type Snap struct {
	Name      string `json:"name"`
	Size      int64  `json:"size"`
	Protected string `json:"protected"` // "true" or "false"
}

// Snaps lists an image's snapshots.
func (c *Conn) Snaps(ctx context.Context, image string) ([]Snap, error) {
	out, err := c.run(ctx, "rbd", "snap", "ls", c.spec(image), "--format", "json")
	if err != nil {
		return nil, err
	}
	var snaps []Snap
	if err := json.Unmarshal(out, &snaps); err != nil {
		return nil, fmt.Errorf("rbd snap ls %s: %w", c.spec(image), err)
	}
	return snaps, nil
}

// Clone makes child a copy-on-write clone of image@snap (protected): O(1)
// whatever the parent's size.
func (c *Conn) Clone(ctx context.Context, image, snap, child string) error {
	_, err := c.run(ctx, "rbd", "clone", c.snapSpec(image, snap), c.spec(child))
	return err
}

// Flatten copies a clone's parent data into it, so that the parent's
// snapshot can go.
func (c *Conn) Flatten(ctx context.Context, image string) error {
	_, err := c.run(ctx, "rbd", "flatten", "--no-progress", c.spec(image))
	return err
}

// Children lists the clones of image@snap, as pool/image.
func (c *Conn) Children(ctx context.Context, image, snap string) ([]string, error) {
	out, err := c.run(ctx, "rbd", "children", c.snapSpec(image, snap), "--format", "json")
	if err != nil {
		return nil, err
	}
	var kids []struct {
		Pool  string `json:"pool"`
		Image string `json:"image"`
	}
	if err := json.Unmarshal(out, &kids); err != nil {
		return nil, fmt.Errorf("rbd children %s: %w", c.snapSpec(image, snap), err)
	}
	names := make([]string, 0, len(kids))
	for _, k := range kids {
		names = append(names, k.Pool+"/"+k.Image)
	}
	return names, nil
}

// Watchers lists the client addresses that have an image open
// ("169.254.7.2:0/3712"), from `rbd status`.
func (c *Conn) Watchers(ctx context.Context, image string) ([]string, error) {
	out, err := c.run(ctx, "rbd", "status", c.spec(image), "--format", "json")
	if err != nil {
		return nil, err
	}
	var st struct {
		Watchers []struct {
			Address string `json:"address"`
		} `json:"watchers"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return nil, fmt.Errorf("rbd status %s: %w", c.spec(image), err)
	}
	addrs := make([]string, 0, len(st.Watchers))
	for _, w := range st.Watchers {
		addrs = append(addrs, w.Address)
	}
	return addrs, nil
}

// hostEntry is the blocklist entry of every client from ip: the form
// mon 'profile rbd' may add (a bare IP is refused with EACCES).
func hostEntry(ip netip.Addr) string {
	return netip.AddrPortFrom(ip, 0).String() + "/0"
}

// BlocklistAdd makes the cluster refuse every client from ip (all of a
// node's clients) for d: a fenced node's QEMU can no longer write, and
// neither can anything started there until BlocklistRemove.
func (c *Conn) BlocklistAdd(ctx context.Context, ip netip.Addr, d time.Duration) error {
	_, err := c.run(ctx, "ceph", "osd", "blocklist", "add", hostEntry(ip), strconv.Itoa(int(d/time.Second)))
	return err
}

// BlocklistRemove lifts the entry of ip; a missing one is no error. The
// user needs mon 'profile rbd, allow command "osd blocklist" with
// blocklistop=rm' (profile rbd alone may add, not remove).
func (c *Conn) BlocklistRemove(ctx context.Context, ip netip.Addr) error {
	_, err := c.run(ctx, "ceph", "osd", "blocklist", "rm", hostEntry(ip))
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// BlocklistEntry is one blocklisted address and when it expires.
type BlocklistEntry struct {
	Addr  string `json:"addr"`
	Until string `json:"until"`
}

// Blocklist lists the cluster's blocklist.
func (c *Conn) Blocklist(ctx context.Context) ([]BlocklistEntry, error) {
	out, err := c.run(ctx, "ceph", "osd", "blocklist", "ls", "--format", "json")
	if err != nil {
		return nil, err
	}
	// Pacific prints a second list after the entries: the first value is
	// the list.
	var entries []BlocklistEntry
	if err := json.NewDecoder(bytes.NewReader(out)).Decode(&entries); err != nil {
		return nil, fmt.Errorf("ceph osd blocklist ls: %w", err)
	}
	return entries, nil
}
