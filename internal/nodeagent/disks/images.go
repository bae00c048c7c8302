package disks

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/reported"
)

// The node's image list (NodeStatus.images) is kept fresh by a goroutine of
// its own: listing hashes new images, which takes seconds per gigabyte, and
// must never hold up a heartbeat. Heartbeats only carry the latest list,
// and only when it differs from what the server has.

// DefaultImageRefreshPeriod is how often the image directory is looked at.
const DefaultImageRefreshPeriod = 15 * time.Second

// InventoryOptions configure an Inventory.
type InventoryOptions struct {
	// ImageDir is the node image directory.
	ImageDir string
	// RefreshPeriod is how often ImageDir is looked at; default
	// DefaultImageRefreshPeriod.
	RefreshPeriod time.Duration
	// Clock times the refreshes; the real clock when nil.
	Clock  clock.WithTicker
	Logger *slog.Logger
}

// Inventory is the node's image list as last listed and as last sent
// (reported.Latest: Changed, Pending, MarkSent).
type Inventory struct {
	*reported.Latest[*apiv1.NodeImageList]
	opts InventoryOptions
	log  *slog.Logger

	// refresh asks Run for a listing before the period is over.
	refresh chan struct{}
}

// NewInventory returns an Inventory; Run keeps it fresh.
func NewInventory(opts InventoryOptions) *Inventory {
	if opts.RefreshPeriod <= 0 {
		opts.RefreshPeriod = DefaultImageRefreshPeriod
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Inventory{Latest: reported.New[*apiv1.NodeImageList](), opts: opts, log: opts.Logger, refresh: make(chan struct{}, 1)}
}

// Refresh asks for a listing soon: an image was added or removed by the
// agent itself, and placement should know before the next period.
func (inv *Inventory) Refresh() {
	select {
	case inv.refresh <- struct{}{}:
	default: // one is pending already
	}
}

// ForRegister waits up to wait for the first listing and returns the list
// to register with; nil when there is none yet.
func (inv *Inventory) ForRegister(ctx context.Context, wait time.Duration) *apiv1.NodeImageList {
	return inv.Latest.ForRegister(ctx, inv.opts.Clock, wait)
}

// listedBefore reports whether a listing was recorded.
func (inv *Inventory) listedBefore() bool {
	_, ok := inv.Current()
	return ok
}

// Run lists the image directory now and then every refresh period until
// ctx ends.
func (inv *Inventory) Run(ctx context.Context) {
	r := refresher{inv: inv}
	t := inv.opts.Clock.NewTicker(inv.opts.RefreshPeriod)
	defer t.Stop()
	for {
		r.refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-inv.refresh:
		}
	}
}

// refresher is the state of Run.
type refresher struct {
	inv     *Inventory
	store   *imagestore.Store
	list    func(context.Context) ([]imagestore.Image, error) // store.List; tests count calls
	lastErr string
	// last fingerprints the directory as of the last complete listing.
	last [sha256.Size]byte
}

func (r *refresher) refresh(ctx context.Context) {
	inv := r.inv
	if r.store == nil {
		s, err := imagestore.Open(inv.opts.ImageDir)
		if err != nil {
			r.warn("cannot open the image directory; the node reports no images", err)
			inv.Tried()
			return
		}
		r.store = s
	}
	if r.list == nil {
		r.list = r.store.List
	}
	fp, err := dirFingerprint(inv.opts.ImageDir)
	if err == nil && fp == r.last && inv.listedBefore() {
		return
	}
	imgs, err := r.list(ctx)
	if err != nil {
		if ctx.Err() == nil {
			r.warn("listing images failed; keeping the previous list", err)
		}
		inv.Tried()
		return
	}
	r.last, r.lastErr = fp, ""
	l := inv.nodeImages(imgs)
	if inv.Set(l) {
		inv.log.Info("node images listed", "count", len(l.Items))
	}
}

// warn logs err once per cause, not every period.
func (r *refresher) warn(msg string, err error) {
	if err.Error() != r.lastErr {
		r.inv.log.Warn(msg, "dir", r.inv.opts.ImageDir, "err", err)
	}
	r.lastErr = err.Error()
}

// nodeImages turns a listing into the list the node reports. What counts
// as an image is what imagestore.List finds: every regular file outside
// the store's dot files. That includes the kernels and initrds of direct
// kernel boot, which qemu-img takes for raw images (virtual size = file
// size); they stay in the list, since placement needs to know which nodes
// have them too. Files the store would refuse as base images (a backing
// file, an unsupported format) are left out: no VMI can use them.
func (inv *Inventory) nodeImages(imgs []imagestore.Image) *apiv1.NodeImageList {
	l := &apiv1.NodeImageList{}
	size := 0 // NodeImageListSize(l.Items), kept as items are added
	for _, img := range imgs {
		if img.Error != "" {
			inv.log.Warn("image left out of the node's list", "image", img.Name, "err", img.Error)
			continue
		}
		ni := &apiv1.NodeImage{Name: img.Name, Format: img.Format, VirtualSizeBytes: img.VirtualSize, SizeBytes: img.Size, Sha256: img.SHA256}
		// The server refuses a list with a bad entry; better one image
		// missing than the node never registering.
		if errs := validation.ValidateNodeImages([]*apiv1.NodeImage{ni}, field.NewPath("images")); len(errs) > 0 {
			inv.log.Warn("image left out of the node's list", "image", img.Name, "err", errs.ToAggregate())
			continue
		}
		if len(l.Items) == validation.MaxNodeImages {
			inv.log.Warn("too many images; the node's list is cut short", "max", validation.MaxNodeImages)
			break
		}
		itemSize := protowire.SizeTag(1) + protowire.SizeBytes(proto.Size(ni))
		if size+itemSize > validation.MaxNodeImageListBytes {
			inv.log.Warn("image list too large; the node's list is cut short", "max_bytes", validation.MaxNodeImageListBytes, "images", len(l.Items))
			break
		}
		size += itemSize
		l.Items = append(l.Items, ni)
	}
	return l
}

// dirFingerprint hashes what a listing depends on, file by file as
// imagestore.List walks them: name, size, modification time and inode,
// which catches a file replaced by rename with one of the same size and
// mtime. Not the change time: libvirt chowns images on every guest start
// and stop (see imagestore's cache). It costs one stat per file, no reads,
// so an unchanged directory is not listed again.
func dirFingerprint(dir string) ([sha256.Size]byte, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == dir {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil // the store's own files
		}
		if d.IsDir() {
			return nil
		}
		fi, err := os.Stat(path) // follows symlinks, as List does
		if err != nil {
			fmt.Fprintf(h, "%s\x00error %v\n", path, err)
			return nil
		}
		var ino uint64
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			ino = st.Ino
		}
		fmt.Fprintf(h, "%s\x00%d %d %d %v\n", path, fi.Size(), fi.ModTime().UnixNano(), ino, fi.Mode())
		return nil
	})
	if err != nil {
		return [sha256.Size]byte{}, fmt.Errorf("scanning %s: %w", dir, err)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum, nil
}
