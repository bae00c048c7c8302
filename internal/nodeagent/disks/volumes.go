package disks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/cloudinit"
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/storage"
)

// keptDir holds what a guest keeps across instances (persistent
// volumes, NVRAM): its VM's directory, or a bare VMI's own, whose
// lifetime they share. rec.Dir is checked by Prepare.
func (p *Preparer) keptDir(rec *state.VMI) (string, error) {
	if rec.VMUID == "" {
		return rec.Dir, nil
	}
	return p.opts.Layout.VMDir(rec.VMUID)
}

// persistentPath is where a persistent volume lives (keptDir).
func (p *Preparer) persistentPath(rec *state.VMI, volume string) (string, error) {
	dir, err := p.keptDir(rec)
	if err != nil {
		return "", err
	}
	return nodedir.FileIn(nodedir.VolumesDir(dir), volume+".qcow2")
}

// volumeSource is the disk of persistent volume d, in its VM's directory
// (made if needed), with the size it must have (validation.VolumeBytes:
// the launcher grows a running guest's disk to it).
func (p *Preparer) volumeSource(vmi *apiv1.VirtualMachineInstance, rec *state.VMI, d *apiv1.Disk, pv *apiv1.PersistentVolume) (*launcherpb.DiskSource, error) {
	path, err := p.persistentPath(rec, d.GetName())
	if err != nil {
		return nil, failed(fmt.Errorf("disk %q: %w", d.GetName(), err))
	}
	size, err := validation.VolumeBytes(pv.GetSize())
	if err != nil {
		return nil, failed(fmt.Errorf("persistent volume %q: %w", d.GetName(), err))
	}
	src := diskSource(d)
	src.Path, src.Format, src.SizeBytes = path, "qcow2", size
	if err := p.ensureVMDir(vmi, rec); err != nil {
		return nil, err
	}
	return src, nil
}

// ensureVMDir makes the directory of the VMI's VM. One that belongs to
// another VM (a VMI whose owner uid is another namespace's VM) fails the
// VMI: its volumes are never handed over.
func (p *Preparer) ensureVMDir(vmi *apiv1.VirtualMachineInstance, rec *state.VMI) error {
	err := p.opts.Layout.EnsureVMDir(rec.VMUID, vmi.GetMetadata().GetNamespace(), vmi.GetMetadata().GetName())
	if errors.Is(err, nodedir.ErrForeign) {
		return failed(fmt.Errorf("metadata.owner_references: %w", err))
	}
	return err
}

// persistentDisk provisions a persistent volume on first use (a
// blank disk, or a copy of an image grown to the requested size) and
// attaches it. While the copy runs the VMI carries Provisioning=True; a
// failure leaves the VMI waiting with Synchronized=False/DataVolumeError
// and is retried with backoff.
func (p *Preparer) persistentDisk(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI, d *apiv1.Disk, pv *apiv1.PersistentVolume) (*launcherpb.DiskSource, error) {
	src, err := p.volumeSource(vmi, rec, d, pv)
	if err != nil {
		return nil, err
	}
	if done, err := p.importAdopted(ctx, vmi, rec, d, src.Path); err != nil {
		return nil, err
	} else if done {
		return src, nil
	}
	if err := p.provisionFile(ctx, vmi, d, pv, src.Path); err != nil {
		return nil, err
	}
	return src, nil
}

// provisionFile makes the file of persistent volume d at path unless it
// exists: a blank qcow2 or a copy of the image grown to the size.
func (p *Preparer) provisionFile(ctx context.Context, vmi *apiv1.VirtualMachineInstance, d *apiv1.Disk, pv *apiv1.PersistentVolume, path string) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("disk %q: %w", d.GetName(), err)
	}

	volErr := func(err error) error { return volumeError(d.GetName(), err) }
	size, err := validation.VolumeBytes(pv.GetSize())
	if err != nil {
		return volErr(err)
	}
	var base string
	var info ImageInfo
	if pv.GetImage() != "" {
		if base, err = validation.ResolveImagePath(p.opts.ImageDir, pv.GetImage()); err != nil {
			return volErr(err)
		}
		if info, err = p.opts.Images.Info(ctx, base); err != nil {
			return volErr(fmt.Errorf("reading image %s: %w", pv.GetImage(), err))
		}
		// An image imported by hand, or pulled before the cap, may claim
		// any size: copying it would make a disk the guest can fill the
		// node with, or keep qemu-img busy with tables of petabytes.
		if p.opts.MaxVirtualSize != nil {
			if err := imagestore.CheckVirtualSize(info.VirtualSize, p.opts.MaxVirtualSize()); err != nil {
				return volErr(fmt.Errorf("image %s: %w (the server's --image-max-virtual-size)", pv.GetImage(), err))
			}
		}
		if size < info.VirtualSize {
			return volErr(fmt.Errorf("size %s is below the virtual size of image %s (%d bytes)", pv.GetSize(), pv.GetImage(), info.VirtualSize))
		}
	}

	msg := fmt.Sprintf("creating persistent volume %q (%s)", d.GetName(), pv.GetSize())
	if base != "" {
		msg = fmt.Sprintf("copying image %s into persistent volume %q (%s)", pv.GetImage(), d.GetName(), pv.GetSize())
	}
	if p.opts.Progress != nil {
		if err := p.opts.Progress.Provisioning(ctx, vmi, msg); err != nil {
			return err
		}
	}
	p.log.Info("provisioning persistent volume", "vmi", apiv1.Ref(vmi.GetMetadata().GetNamespace(), vmi.GetMetadata().GetName()), "volume", d.GetName(), "size", pv.GetSize(), "image", pv.GetImage())
	start := p.opts.Clock.Now()
	if err := nodedir.MkdirTraversable(filepath.Dir(path)); err != nil {
		return fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	// Made aside, synced and renamed (fsutil.Commit): a half-written
	// volume must never pass for the guest's data after a crash or a
	// power cut, and once the guest writes to it, its name must not be
	// lost (a lost rename would have a blank volume made again). A crash
	// leaves the temporary file, removed and made again here.
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	if base == "" {
		err = p.opts.Images.CreateBlank(ctx, tmp, size)
	} else {
		err = p.opts.Images.CopyResized(ctx, base, info.Format, tmp, size)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return volErr(err)
	}
	if err := fsutil.Commit(tmp, path); err != nil {
		return fmt.Errorf("disk %q: %w", d.GetName(), err)
	}
	p.log.Info("persistent volume ready", "vmi", apiv1.Ref(vmi.GetMetadata().GetNamespace(), vmi.GetMetadata().GetName()), "volume", d.GetName(), "took", p.opts.Clock.Since(start).Round(time.Millisecond))
	return nil
}

// volumeError is a persistent volume that cannot be provisioned or grown
// yet: the VMI waits with DataVolumeError and the agent retries with
// backoff.
func volumeError(name string, err error) error {
	return &Error{Reason: apiv1.ReasonDataVolumeError, Retry: true, Err: fmt.Errorf("persistent volume %q: %w", name, err)}
}

// GrowVolumes grows each persistent volume of the VMI whose file is
// smaller than its size (raised while the guest was stopped, or while it
// ran on a node agent that went away), before the domain starts: the
// caller makes sure no QEMU has the volumes open. A volume not made yet is
// Prepare's, which makes it at its size; one larger than its size is left
// as it is (a disk never shrinks). The size is compared on every start, so
// a growth a crash cut short is done again (QemuImg.Grow says why the file
// is sound meanwhile). Failing, the VMI waits with DataVolumeError and the
// agent retries with backoff.
func (p *Preparer) GrowVolumes(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI) error {
	if err := p.opts.Layout.CheckVMIDir(rec.UID, rec.Dir); err != nil {
		return failed(err)
	}
	for _, v := range vmi.GetSpec().GetVolumes() {
		pv := v.GetPersistent()
		if pv == nil {
			continue
		}
		name := v.GetName()
		var path string
		var err error
		switch {
		case pv.IsLocal():
			path, err = p.persistentPath(rec, name)
		default:
			// An rbd volume is grown where it is attached (Prepare); a
			// file on a shared filesystem here, as a local one.
			var class *storage.Class
			if class, err = p.classOf(ctx, pv); err == nil && class.SharedPath() == "" {
				continue
			}
			if err == nil {
				path, err = sharedVolumePath(class, rec, name)
			}
		}
		if err != nil {
			return failed(fmt.Errorf("disk %q: %w", name, err))
		}
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return fmt.Errorf("disk %q: %w", name, err)
		}
		want, err := validation.VolumeBytes(pv.GetSize())
		if err != nil {
			return failed(fmt.Errorf("persistent volume %q: %w", name, err))
		}
		info, err := p.opts.Images.Info(ctx, path)
		if err != nil {
			return volumeError(name, err)
		}
		if info.VirtualSize >= want {
			continue
		}
		ref := apiv1.Ref(vmi.GetMetadata().GetNamespace(), vmi.GetMetadata().GetName())
		p.log.Info("growing persistent volume before the guest starts", "vmi", ref, "volume", name,
			"from_bytes", info.VirtualSize, "to_bytes", want, "size", pv.GetSize())
		start := p.opts.Clock.Now()
		if err := p.opts.Images.Grow(ctx, path, want); err != nil {
			return volumeError(name, fmt.Errorf("growing it from %d to %d bytes: %w", info.VirtualSize, want, err))
		}
		p.log.Info("persistent volume grown", "vmi", ref, "volume", name, "took", p.opts.Clock.Since(start).Round(time.Millisecond))
	}
	return nil
}

// incomingVolume makes a persistent volume blank at its size for a live
// migration to copy into (PrepareIncoming).
func (p *Preparer) incomingVolume(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI, d *apiv1.Disk, pv *apiv1.PersistentVolume) (*launcherpb.DiskSource, error) {
	src, err := p.volumeSource(vmi, rec, d, pv)
	if err != nil {
		return nil, err
	}
	path := src.Path
	if err := nodedir.MkdirTraversable(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	if err := p.opts.Images.CreateBlank(ctx, tmp, src.SizeBytes); err != nil {
		_ = os.Remove(tmp)
		return nil, failed(fmt.Errorf("persistent volume %q: %w", d.GetName(), err))
	}
	if err := fsutil.Commit(tmp, path); err != nil {
		return nil, fmt.Errorf("disk %q: %w", d.GetName(), err)
	}
	return src, nil
}

// cloudInitDisk writes the NoCloud seed ISO of the VMI: meta-data
// with instance-id = the VMI uid (cloud-init re-runs its per-instance
// modules for each new instance) and local-hostname = the VM name.
func cloudInitDisk(vmi *apiv1.VirtualMachineInstance, d *apiv1.Disk, ci *apiv1.CloudInitNoCloud, disksDir string) (*launcherpb.DiskSource, error) {
	path, err := nodedir.FileIn(disksDir, d.GetName()+".iso")
	if err != nil {
		return nil, failed(fmt.Errorf("disk %q: %w", d.GetName(), err))
	}
	src := diskSource(d)
	src.Path, src.Format, src.ReadOnly = path, "raw", true
	if _, err := os.Stat(path); err == nil {
		return src, nil // the spec is immutable: the seed written is the seed
	}
	seed := cloudinit.Seed{
		InstanceID:    vmi.GetMetadata().GetUid(),
		Hostname:      vmi.GetMetadata().GetName(),
		UserData:      ci.GetUserData(),
		NetworkConfig: ci.GetNetworkData(),
	}
	if err := cloudinit.WriteNoCloudISO(path, 0o600, seed); err != nil {
		return nil, failed(fmt.Errorf("disk %q: %w", d.GetName(), err))
	}
	// WriteNoCloudISO syncs the seed before its rename; the rename is
	// made durable here. (A lost one only means writing it again.)
	if err := fsutil.SyncDir(disksDir); err != nil {
		return nil, fmt.Errorf("disk %q: %w", d.GetName(), err)
	}
	return src, nil
}
