// Package disks is the node agent's disk room: it prepares the files a
// VMI's domain is built from (qcow2 overlays over node images, persistent
// volumes kept per VM, cloud-init NoCloud seeds, kernel boot paths) and
// keeps the node's image list (the inventory heartbeats carry). Images
// are inspected and disks created through an ImageTool, qemu-img in
// production.
package disks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/firmware"
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// ReasonPrepareFailed is the reason an Error fails a VMI with when its
// files cannot be prepared; a persistent volume that cannot be
// provisioned holds it with apiv1.ReasonDataVolumeError instead.
const ReasonPrepareFailed = "PrepareFailed"

// Progress is told when a slow step starts, so that the VMI can show it.
type Progress interface {
	// Provisioning says that a volume of vmi is being created; msg says
	// which.
	Provisioning(ctx context.Context, vmi *apiv1.VirtualMachineInstance, msg string) error
}

// Options configure a Preparer.
type Options struct {
	// ImageDir is the node image directory images are resolved in.
	ImageDir string
	Layout   nodedir.Layout
	// Images inspects images and creates disks; nil runs qemu-img.
	Images ImageTool
	// MaxVirtualSize is the largest virtual size of an image a persistent
	// volume may be copied from (the server's --image-max-virtual-size);
	// nil takes none.
	MaxVirtualSize func() int64
	// Progress is told when a volume is being created; nil tells no one.
	Progress Progress
	// Classes are the storage classes of the node (package storage); nil
	// fails every volume on a class.
	Classes Classes
	// NodeName names what the node makes in shared storage for a while
	// (an image's import into a pool).
	NodeName string
	// Firmware names the EFI build libvirt boots a guest with, whose
	// VARS template an NVRAM on RBD is made from; nil reads the host's
	// firmware descriptors (package firmware).
	Firmware Firmware
	// StorageStartTimeout bounds the start of a domain with an rbd disk
	// (launcherpb.SyncOptions.start_timeout_millis); 0 leaves it
	// unbounded.
	StorageStartTimeout time.Duration
	// Adopted are the files adopted VMs copy their volumes from
	// (adopted.go); nil adopts none.
	Adopted AdoptedSources
	// Clock times provisioning for the log; the real clock when nil.
	Clock  clock.PassiveClock
	Logger *slog.Logger
}

// Preparer prepares VMIs' disks.
type Preparer struct {
	opts Options
	log  *slog.Logger
}

// New returns a Preparer.
func New(opts Options) *Preparer {
	if opts.Images == nil {
		opts.Images = QemuImg{}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Firmware == nil {
		opts.Firmware = &firmware.Resolver{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Preparer{opts: opts, log: opts.Logger}
}

// Error is a VMI that cannot be prepared as it is: retrying does not
// help, so the VMI fails with Reason, unless Retry says otherwise.
type Error struct {
	Reason string
	Err    error
	// Retry: the VMI stays as it is and the agent tries again with
	// backoff (a persistent volume that could not be provisioned yet, as
	// CDI retries a DataVolume import).
	Retry bool
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// failed is an Error that fails the VMI.
func failed(err error) *Error { return &Error{Reason: ReasonPrepareFailed, Err: err} }

// Prepare lays out the VMI's files and returns the options its domain is
// built from, as far as they are files: disks, kernel boot and console
// log; the caller adds the rest. It is idempotent: an existing overlay is
// kept, since it holds the guest's writes. An error the VMI should show is
// an *Error.
func (p *Preparer) Prepare(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI) (*launcherpb.SyncOptions, error) {
	return p.prepare(ctx, vmi, rec, false)
}

// PrepareIncoming lays out the files of a live migration's target: every
// writable disk is made blank (an overlay over the same base image, or an
// empty volume of the volume's size), whatever is there already (left by
// an earlier instance, or a migration that failed), because the migration
// copies the source's data into it and a block it does not copy must read
// as the source's does: from the base image, or zero.
func (p *Preparer) PrepareIncoming(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI) (*launcherpb.SyncOptions, error) {
	return p.prepare(ctx, vmi, rec, true)
}

func (p *Preparer) prepare(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI, incoming bool) (*launcherpb.SyncOptions, error) {
	// Every file below is made in the record's directory: it must be the
	// VMI's own under the node data dir, whatever wrote the record.
	if err := p.opts.Layout.CheckVMIDir(rec.UID, rec.Dir); err != nil {
		return nil, failed(err)
	}
	disksDir := nodedir.DisksDir(rec.Dir)
	if err := nodedir.MkdirTraversable(disksDir); err != nil {
		return nil, fmt.Errorf("creating %s: %w", disksDir, err)
	}
	opts := &launcherpb.SyncOptions{ConsoleLogPath: nodedir.ConsoleLogPath(rec.Dir)}
	volumes := map[string]*apiv1.Volume{}
	for _, v := range vmi.GetSpec().GetVolumes() {
		volumes[v.GetName()] = v
	}
	for _, d := range vmi.GetSpec().GetDomain().GetDevices().GetDisks() {
		v := volumes[d.GetName()]
		var (
			src *launcherpb.DiskSource
			err error
		)
		switch {
		case v.GetImage() != nil:
			src, err = p.imageDisk(ctx, d, v.GetImage(), disksDir, incoming)
		case v.GetPersistent() != nil && !validation.UsesLocalStorage(v.GetPersistent()):
			src, err = p.classVolume(ctx, vmi, rec, d, v.GetPersistent(), opts, incoming)
		case v.GetPersistent() != nil && incoming:
			src, err = p.incomingVolume(ctx, vmi, rec, d, v.GetPersistent())
		case v.GetPersistent() != nil:
			src, err = p.persistentDisk(ctx, vmi, rec, d, v.GetPersistent())
		case v.GetCloudInitNoCloud() != nil:
			src, err = cloudInitDisk(vmi, d, v.GetCloudInitNoCloud(), disksDir)
		default:
			err = failed(fmt.Errorf("disk %q: no volume of that name", d.GetName()))
		}
		if err != nil {
			return nil, err
		}
		// The launcher plugs it into a running domain, and gives it its
		// name as serial (docs/hotplug.md).
		src.Hotpluggable = apiv1.Hotpluggable(v)
		opts.Disks = append(opts.Disks, src)
	}
	if kb := vmi.GetSpec().GetDomain().GetFirmware().GetKernelBoot(); kb != nil {
		// Resolved only: whether the files exist is libvirt's to say, in
		// the message the VMI then carries.
		var err error
		if kb.GetKernel() != "" {
			if opts.KernelPath, err = validation.ResolveImagePath(p.opts.ImageDir, kb.GetKernel()); err != nil {
				return nil, failed(fmt.Errorf("kernel: %w", err))
			}
		}
		if kb.GetInitrd() != "" {
			if opts.InitrdPath, err = validation.ResolveImagePath(p.opts.ImageDir, kb.GetInitrd()); err != nil {
				return nil, failed(fmt.Errorf("initrd: %w", err))
			}
		}
		opts.KernelCmdline = kb.GetCmdline()
	}
	if validation.BootsEFI(vmi.GetSpec()) {
		if err := p.nvram(ctx, vmi, rec, opts, incoming); err != nil {
			return nil, err
		}
	}
	return opts, nil
}

// imageDisk gives a disk a qcow2 overlay over its base image, so
// the guest never writes the shared base (KubeVirt's containerDisk). A
// CD-ROM reads the base directly.
func (p *Preparer) imageDisk(ctx context.Context, d *apiv1.Disk, img *apiv1.ImageVolume, disksDir string, fresh bool) (*launcherpb.DiskSource, error) {
	base, err := validation.ResolveImagePath(p.opts.ImageDir, img.GetName())
	if err != nil {
		return nil, failed(fmt.Errorf("disk %q: %w", d.GetName(), err))
	}
	src := diskSource(d)
	info, err := p.opts.Images.Info(ctx, base)
	if err != nil {
		return nil, failed(fmt.Errorf("disk %q: reading image %s: %w", d.GetName(), img.GetName(), err))
	}
	format := info.Format
	if src.Device == "cdrom" {
		src.Path, src.Format = base, format
		return src, nil
	}
	if src.Path, err = nodedir.FileIn(disksDir, d.GetName()+".qcow2"); err != nil {
		return nil, failed(fmt.Errorf("disk %q: %w", d.GetName(), err))
	}
	src.Format = "qcow2"
	if fresh {
		if err := os.Remove(src.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("disk %q: %w", d.GetName(), err)
		}
	}
	if _, err := os.Stat(src.Path); err == nil {
		return src, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("disk %q: %w", d.GetName(), err)
	}
	// Created aside, synced and renamed (fsutil.Commit), so a crash, a
	// power cut included, never leaves a half-made overlay that a later
	// pass would take for the guest's disk; what a crash leaves is the
	// temporary file, removed and made again here.
	tmp := src.Path + ".tmp"
	_ = os.Remove(tmp)
	if err := p.opts.Images.CreateOverlay(ctx, base, format, tmp); err != nil {
		_ = os.Remove(tmp)
		return nil, failed(fmt.Errorf("disk %q: creating overlay: %w", d.GetName(), err))
	}
	if err := fsutil.Commit(tmp, src.Path); err != nil {
		return nil, fmt.Errorf("disk %q: %w", d.GetName(), err)
	}
	return src, nil
}

// diskSource is what the VMI's disk says of its device: name, boot order,
// serial, and disk or CD-ROM with its bus (a CD-ROM is read-only). The
// caller adds the file.
func diskSource(d *apiv1.Disk) *launcherpb.DiskSource {
	src := &launcherpb.DiskSource{Name: d.GetName(), BootOrder: d.GetBootOrder(), Serial: d.GetSerial()}
	if cd := d.GetCdrom(); cd != nil {
		src.Device, src.Bus, src.ReadOnly = "cdrom", cd.GetBus(), true
	} else {
		src.Device, src.Bus, src.ReadOnly = "disk", d.GetDisk().GetBus(), d.GetDisk().GetReadOnly()
	}
	return src
}
