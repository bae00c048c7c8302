package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// ImageTool inspects images and creates the disks guests use.
type ImageTool interface {
	// Info returns the format (qcow2, raw, ...) and virtual size of an
	// image file.
	Info(ctx context.Context, path string) (ImageInfo, error)
	// CreateOverlay creates a qcow2 overlay backed by base.
	CreateOverlay(ctx context.Context, base, baseFormat, overlay string) error
	// CreateBlank creates an empty qcow2 image of size bytes.
	CreateBlank(ctx context.Context, path string, size int64) error
	// CopyResized writes a standalone qcow2 copy of base grown to size
	// bytes (never shrunk).
	CopyResized(ctx context.Context, base, baseFormat, dst string, size int64) error
}

// ImageInfo is what ImageTool.Info reports.
type ImageInfo struct {
	Format      string
	VirtualSize int64
}

// QemuImg is the ImageTool that runs qemu-img (from PATH when Path is
// empty).
type QemuImg struct {
	Path string
}

var _ ImageTool = QemuImg{}

func (q QemuImg) bin() string {
	if q.Path == "" {
		return "qemu-img"
	}
	return q.Path
}

func (q QemuImg) Info(ctx context.Context, path string) (ImageInfo, error) {
	// -U (force share): base images are shared by running guests, whose
	// QEMU holds a lock on them.
	out, err := runCommand(ctx, q.bin(), "info", "-U", "--output=json", path)
	if err != nil {
		return ImageInfo{}, err
	}
	var info struct {
		Format      string `json:"format"`
		VirtualSize int64  `json:"virtual-size"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return ImageInfo{}, fmt.Errorf("qemu-img info %s: decoding output: %w", path, err)
	}
	if info.Format == "" {
		return ImageInfo{}, fmt.Errorf("qemu-img info %s: no format reported", path)
	}
	return ImageInfo{Format: info.Format, VirtualSize: info.VirtualSize}, nil
}

func (q QemuImg) CreateOverlay(ctx context.Context, base, baseFormat, overlay string) error {
	_, err := runCommand(ctx, q.bin(), "create", "-f", "qcow2", "-F", baseFormat, "-b", base, overlay)
	return err
}

func (q QemuImg) CreateBlank(ctx context.Context, path string, size int64) error {
	_, err := runCommand(ctx, q.bin(), "create", "-q", "-f", "qcow2", path, strconv.FormatInt(size, 10))
	return err
}

func (q QemuImg) CopyResized(ctx context.Context, base, baseFormat, dst string, size int64) error {
	if _, err := runCommand(ctx, q.bin(), "convert", "-U", "-q", "-f", baseFormat, "-O", "qcow2", base, dst); err != nil {
		return err
	}
	info, err := q.Info(ctx, dst)
	if err != nil {
		return err
	}
	if size <= info.VirtualSize {
		return nil
	}
	_, err = runCommand(ctx, q.bin(), "resize", "-q", "-f", "qcow2", dst, strconv.FormatInt(size, 10))
	return err
}

// prepareError is a VMI that cannot be prepared as it is; retrying does
// not help, so the VMI fails with reason.
type prepareError struct {
	reason string
	err    error
	// retry: the VMI stays as it is and the agent tries again with
	// backoff (a persistent volume that could not be provisioned yet, as
	// CDI retries a DataVolume import).
	retry bool
}

func (e *prepareError) Error() string { return e.err.Error() }
func (e *prepareError) Unwrap() error { return e.err }

// prepare lays out the VMI's files and returns the options its domain is
// built from. It is idempotent: an existing overlay is kept, since it
// holds the guest's writes.
func (a *Agent) prepare(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI) (*launcherpb.SyncOptions, error) {
	disksDir := filepath.Join(rec.Dir, "disks")
	if err := nodedir.MkdirTraversable(disksDir); err != nil {
		return nil, fmt.Errorf("creating %s: %w", disksDir, err)
	}
	opts := &launcherpb.SyncOptions{
		Kvm:            a.host.KVMUsable,
		ConsoleLogPath: ConsoleLogPath(rec.Dir),
		DomainName:     rec.DomainName,
		// Recorded in the domain, so the launcher's lease watchdog
		// never fences a Wait domain, whoever arms it.
		NodeFailurePolicy: rec.NodeFailurePolicy,
	}
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
			src, err = a.prepareImageDisk(ctx, d, v.GetImage(), disksDir)
		case v.GetPersistent() != nil:
			src, err = a.preparePersistentDisk(ctx, vmi, rec, d, v.GetPersistent())
		case v.GetCloudInitNoCloud() != nil:
			src, err = a.prepareCloudInitDisk(vmi, d, v.GetCloudInitNoCloud(), disksDir)
		default:
			err = &prepareError{reason: ReasonPrepareFailed, err: fmt.Errorf("disk %q: no volume of that name", d.GetName())}
		}
		if err != nil {
			return nil, err
		}
		opts.Disks = append(opts.Disks, src)
	}
	if kb := vmi.GetSpec().GetDomain().GetFirmware().GetKernelBoot(); kb != nil {
		// Resolved only: whether the files exist is libvirt's to say, in
		// the message the VMI then carries.
		var err error
		if kb.GetKernel() != "" {
			if opts.KernelPath, err = validation.ResolveImagePath(a.opts.ImageDir, kb.GetKernel()); err != nil {
				return nil, &prepareError{reason: ReasonPrepareFailed, err: fmt.Errorf("kernel: %w", err)}
			}
		}
		if kb.GetInitrd() != "" {
			if opts.InitrdPath, err = validation.ResolveImagePath(a.opts.ImageDir, kb.GetInitrd()); err != nil {
				return nil, &prepareError{reason: ReasonPrepareFailed, err: fmt.Errorf("initrd: %w", err)}
			}
		}
		opts.KernelCmdline = kb.GetCmdline()
	}
	return opts, nil
}

// prepareImageDisk gives a disk a qcow2 overlay over its base image, so
// the guest never writes the shared base (KubeVirt's containerDisk). A
// CD-ROM reads the base directly.
func (a *Agent) prepareImageDisk(ctx context.Context, d *apiv1.Disk, img *apiv1.ImageVolume, disksDir string) (*launcherpb.DiskSource, error) {
	base, err := validation.ResolveImagePath(a.opts.ImageDir, img.GetName())
	if err != nil {
		return nil, &prepareError{reason: ReasonPrepareFailed, err: fmt.Errorf("disk %q: %w", d.GetName(), err)}
	}
	src := diskSource(d)
	info, err := a.opts.Images.Info(ctx, base)
	if err != nil {
		return nil, &prepareError{reason: ReasonPrepareFailed, err: fmt.Errorf("disk %q: reading image %s: %w", d.GetName(), img.GetName(), err)}
	}
	format := info.Format
	if src.Device == "cdrom" {
		src.Path, src.Format = base, format
		return src, nil
	}
	src.Path, src.Format = filepath.Join(disksDir, filepath.Base(d.GetName())+".qcow2"), "qcow2"
	if _, err := os.Stat(src.Path); err == nil {
		return src, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("disk %q: %w", d.GetName(), err)
	}
	// Created aside and renamed, so a crash never leaves a half-made
	// overlay that a later pass would take for the guest's disk.
	tmp := src.Path + ".tmp"
	_ = os.Remove(tmp)
	if err := a.opts.Images.CreateOverlay(ctx, base, format, tmp); err != nil {
		return nil, &prepareError{reason: ReasonPrepareFailed, err: fmt.Errorf("disk %q: creating overlay: %w", d.GetName(), err)}
	}
	if err := os.Rename(tmp, src.Path); err != nil {
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
