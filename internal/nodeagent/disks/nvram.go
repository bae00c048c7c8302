package disks

import (
	"context"
	"errors"
	"fmt"
	"os"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
	"github.com/virtplane/terraform-provider-virtplane/internal/firmware"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/storage"
)

// Firmware is what the disk room needs to know of the host's EFI
// firmware: the build libvirt picks for a guest (package firmware).
type Firmware interface {
	EFI(ctx context.Context, secureBoot bool) (firmware.Firmware, error)
}

// nvram places an EFI guest's variable store (docs/guests.md): on the
// storage class of its volumes when they are all on one
// (validation.NVRAMStorageClass), so that it follows the VM to any node
// of the class; else in the VM's node directory. On a migration's target
// (incoming) it is only named: the source's store comes with the guest
// (shared, or written by QEMU when the guest resumes on a file here).
func (p *Preparer) nvram(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI, opts *launcherpb.SyncOptions, incoming bool) error {
	name := validation.NVRAMStorageClass(vmi.GetSpec())
	if name == "" {
		path, err := p.nvramPath(vmi, rec)
		if err != nil {
			return err
		}
		if incoming {
			// A file left here by an earlier stint of the VM holds old
			// variables. QEMU would overwrite it when the guest resumes,
			// but a migration that fails first must not leave it for a
			// later start: libvirt makes a fresh one from the template.
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("nvram: %w", err)
			}
		}
		opts.NvramPath = path
		if !incoming {
			return p.importAdoptedNVRAM(rec, path)
		}
		return nil
	}
	nvErr := func(err error) error {
		return &Error{Reason: apiv1.ReasonDataVolumeError, Retry: true, Err: fmt.Errorf("EFI NVRAM (storage class %s): %w", name, err)}
	}
	if p.opts.Classes == nil {
		return failed(errors.New("EFI NVRAM: this node has no storage classes"))
	}
	class, err := p.opts.Classes.Lookup(ctx, name)
	if err != nil {
		return nvErr(err)
	}
	own, err := owner(rec)
	if err != nil {
		return failed(fmt.Errorf("EFI NVRAM: %w", err))
	}
	switch {
	case class.RBD() != nil:
		image := ceph.NVRAMImage(own)
		if incoming {
			if _, err := class.Conn.Info(ctx, image); err != nil {
				return nvErr(fmt.Errorf("the NVRAM a migration brings: %w", err))
			}
		} else if image, err = p.rbdNVRAM(ctx, vmi, class, own); err != nil {
			return nvErr(err)
		}
		opts.NvramRbd = class.RBDDisk(image)
		addSecret(opts, class.Secret())
	case class.SharedPath() != "":
		// Next to the VM's volumes there, in its directory checked as
		// they have it (vm.json: another namespace's VM's store is never
		// handed over); libvirt copies the template on the first start,
		// as for a file on the node.
		layout := class.SharedLayout()
		dir, err := layout.VMDir(own)
		if err != nil {
			return failed(fmt.Errorf("EFI NVRAM: %w", err))
		}
		err = layout.EnsureVMDir(own, vmi.GetMetadata().GetNamespace(), vmi.GetMetadata().GetName())
		if errors.Is(err, nodedir.ErrForeign) {
			return failed(fmt.Errorf("metadata.owner_references: %w", err))
		}
		if err != nil {
			return nvErr(err)
		}
		opts.NvramPath = nodedir.NVRAMPath(dir)
	default:
		return failed(fmt.Errorf("EFI NVRAM: storage class %s is of a kind this node does not know", class.Name))
	}
	return nil
}

// rbdNVRAM makes the guest's store on rbd class unless it exists, from
// the VARS template of the firmware libvirt will boot it with.
func (p *Preparer) rbdNVRAM(ctx context.Context, vmi *apiv1.VirtualMachineInstance, class *storage.Class, own string) (string, error) {
	secure := vmi.GetSpec().GetDomain().GetFirmware().GetBootloader().GetEfi().GetSecureBoot()
	template := func(ctx context.Context) (string, error) {
		fw, err := p.opts.Firmware.EFI(ctx, secure)
		if err != nil {
			return "", err
		}
		if fw.NVRAMTemplate == "" {
			return "", fmt.Errorf("the firmware libvirt picks (%s, from %s) keeps no variables", fw.Executable, fw.Descriptor)
		}
		return fw.NVRAMTemplate, nil
	}
	return class.ProvisionNVRAM(ctx, own, template, p.opts.NodeName)
}

// nvramPath is where an EFI guest's variable store lives on the node
// (keptDir, like a persistent volume). A VM's directory is made here
// (EnsureVMDir does nothing for a bare VMI); the file is libvirt's to
// create from the firmware's template.
func (p *Preparer) nvramPath(vmi *apiv1.VirtualMachineInstance, rec *state.VMI) (string, error) {
	dir, err := p.keptDir(rec)
	if err != nil {
		return "", failed(fmt.Errorf("nvram: %w", err))
	}
	if err := p.ensureVMDir(vmi, rec); err != nil {
		if _, ok := errors.AsType[*Error](err); ok {
			return "", err
		}
		return "", fmt.Errorf("nvram: %w", err)
	}
	return nodedir.NVRAMPath(dir), nil
}
