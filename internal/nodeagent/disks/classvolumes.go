package disks

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/storage"
)

// Classes is what the disk room needs of the storage room: a class this
// node uses and reaches, or why not, and what a start on it needs on the
// host (the guest firewall's exception for a local cluster).
type Classes interface {
	Lookup(ctx context.Context, name string) (*storage.Class, error)
	BeforeStart(ctx context.Context, c *storage.Class)
}

// owner is the uid a VMI's volumes on a class belong to: its VM's (only
// VMs have persistent volumes on classes: replica sets have none, and
// bare instances are not made by users); checked, since it names
// directories and images.
func owner(rec *state.VMI) (string, error) {
	if rec.VMUID == "" {
		return "", errors.New("volumes on a storage class belong to a VM, and this instance has none")
	}
	return rec.VMUID, validation.CheckUID(rec.VMUID)
}

// classVolume attaches persistent volume d on a storage class, made on
// first use. On a migration's target (incoming) it is only attached:
// source and target share it, and the source's guest is writing it.
func (p *Preparer) classVolume(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI, d *apiv1.Disk, pv *apiv1.PersistentVolume, opts *launcherpb.SyncOptions, incoming bool) (*launcherpb.DiskSource, error) {
	volErr := func(err error) error {
		return &Error{Reason: apiv1.ReasonDataVolumeError, Retry: true, Err: fmt.Errorf("persistent volume %q (storage class %s): %w", d.GetName(), pv.GetStorageClass(), err)}
	}
	if p.opts.Classes == nil {
		return nil, failed(fmt.Errorf("persistent volume %q: this node has no storage classes", d.GetName()))
	}
	class, err := p.opts.Classes.Lookup(ctx, pv.GetStorageClass())
	if err != nil {
		return nil, volErr(err)
	}
	own, err := owner(rec)
	if err != nil {
		return nil, failed(fmt.Errorf("persistent volume %q: %w", d.GetName(), err))
	}
	// The size a file volume is made at, too, and the launcher keeps the
	// disk at: the quantity rounded up to whole sectors.
	src := diskSource(d)
	if src.SizeBytes, err = validation.VolumeBytes(pv.GetSize()); err != nil {
		return nil, volErr(err)
	}
	switch {
	case class.RBD() != nil:
		// The image is read only to make the volume: a node the VM fails
		// over to need not hold it.
		base := func() (*storage.Base, error) {
			if pv.GetImage() == "" {
				return nil, nil
			}
			return p.baseImage(ctx, pv.GetImage(), src.SizeBytes)
		}
		image, err := p.rbdVolume(ctx, vmi, d, pv, class, own, src.SizeBytes, base, incoming)
		if err != nil {
			return nil, volErr(err)
		}
		src.Format, src.Rbd = "raw", class.RBDDisk(image)
		addSecret(opts, class.Secret())
		p.opts.Classes.BeforeStart(ctx, class)
		// librados waits for an OSD without end: the launcher bounds
		// the start.
		if t := p.opts.StorageStartTimeout; t > 0 {
			opts.StartTimeoutMillis = t.Milliseconds()
		}
	case class.SharedPath() != "":
		// The VM's directory there has its vm.json, checked as a node's
		// own: another namespace's VM's volumes are never handed over.
		layout := class.SharedLayout()
		err := layout.EnsureVMDir(own, vmi.GetMetadata().GetNamespace(), vmi.GetMetadata().GetName())
		if errors.Is(err, nodedir.ErrForeign) {
			return nil, failed(fmt.Errorf("metadata.owner_references: %w", err))
		}
		if err != nil {
			return nil, volErr(err)
		}
		if src.Path, err = sharedVolumePath(class, rec, d.GetName()); err != nil {
			return nil, failed(fmt.Errorf("disk %q: %w", d.GetName(), err))
		}
		src.Format, src.Shared = "qcow2", true
		if !incoming {
			if err := nodedir.MkdirTraversable(filepath.Dir(src.Path)); err != nil {
				return nil, volErr(err)
			}
			if err := p.provisionFile(ctx, vmi, d, pv, src.Path); err != nil {
				return nil, err
			}
		}
	default:
		return nil, failed(fmt.Errorf("persistent volume %q: storage class %s is of a kind this node does not know", d.GetName(), class.Name))
	}
	return src, nil
}

// rbdVolume provisions (or, incoming, only finds) the volume's image.
func (p *Preparer) rbdVolume(ctx context.Context, vmi *apiv1.VirtualMachineInstance, d *apiv1.Disk, pv *apiv1.PersistentVolume, class *storage.Class, own string, size int64, baseOf func() (*storage.Base, error), incoming bool) (string, error) {
	image := ceph.VolumeImage(own, d.GetName())
	info, err := class.Conn.Info(ctx, image)
	switch {
	case err == nil && (incoming || info.Size >= size):
		return image, nil
	case incoming:
		return "", fmt.Errorf("the volume a migration brings: %w", err)
	case err != nil && !errors.Is(err, ceph.ErrNotFound):
		return "", err
	}
	exists := err == nil // and smaller than its size: grown below
	var base *storage.Base
	if !exists { // a new volume: made from its image, if it has one
		if base, err = baseOf(); err != nil {
			return "", err
		}
	}
	if p.opts.Progress != nil {
		msg := fmt.Sprintf("creating persistent volume %q (%s) on storage class %s", d.GetName(), pv.GetSize(), class.Name)
		switch {
		case exists:
			msg = fmt.Sprintf("growing persistent volume %q to %s on storage class %s", d.GetName(), pv.GetSize(), class.Name)
		case base != nil:
			msg = fmt.Sprintf("cloning image %s into persistent volume %q (%s) on storage class %s", pv.GetImage(), d.GetName(), pv.GetSize(), class.Name)
		}
		if err := p.opts.Progress.Provisioning(ctx, vmi, msg); err != nil {
			return "", err
		}
	}
	if exists {
		if err := class.GrowRBD(ctx, image, size); err != nil {
			return "", err
		}
		return image, nil
	}
	return class.CreateRBD(ctx, own, d.GetName(), size, base, p.opts.NodeName)
}

// baseImage describes an image of the node's image dir that a volume of
// size bytes is made from, with the checks a local copy gets.
func (p *Preparer) baseImage(ctx context.Context, name string, size int64) (*storage.Base, error) {
	path, err := validation.ResolveImagePath(p.opts.ImageDir, name)
	if err != nil {
		return nil, err
	}
	st, err := imagestore.Open(p.opts.ImageDir)
	if err != nil {
		return nil, err
	}
	img, err := st.Inspect(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("reading image %s: %w", name, err)
	}
	if p.opts.MaxVirtualSize != nil {
		if err := imagestore.CheckVirtualSize(img.VirtualSize, p.opts.MaxVirtualSize()); err != nil {
			return nil, fmt.Errorf("image %s: %w (the server's --image-max-virtual-size)", name, err)
		}
	}
	if size < img.VirtualSize {
		return nil, fmt.Errorf("size is below the virtual size of image %s (%d bytes)", name, img.VirtualSize)
	}
	return &storage.Base{Path: path, Format: img.Format, VirtualSize: img.VirtualSize, SHA256: img.SHA256}, nil
}

// addSecret adds a class's secret to the domain's, once.
func addSecret(opts *launcherpb.SyncOptions, s *launcherpb.CephSecret) {
	for _, have := range opts.GetCephSecrets() {
		if have.GetUsage() == s.GetUsage() {
			return
		}
	}
	opts.CephSecrets = append(opts.CephSecrets, s)
}

// classOf is the class of a volume on a storage class, as this node uses
// it.
func (p *Preparer) classOf(ctx context.Context, pv *apiv1.PersistentVolume) (*storage.Class, error) {
	if p.opts.Classes == nil {
		return nil, errors.New("this node has no storage classes")
	}
	return p.opts.Classes.Lookup(ctx, pv.GetStorageClass())
}

// sharedVolumePath is where volume name of rec's VM is on shared
// filesystem class.
func sharedVolumePath(class *storage.Class, rec *state.VMI, name string) (string, error) {
	own, err := owner(rec)
	if err != nil {
		return "", err
	}
	vmDir, err := class.SharedLayout().VMDir(own)
	if err != nil {
		return "", err
	}
	return nodedir.FileIn(nodedir.VolumesDir(vmDir), name+".qcow2")
}
