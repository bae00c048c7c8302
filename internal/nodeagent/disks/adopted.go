package disks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// A VM adopted from a libvirt domain (docs/adopt.md) keeps the domain's
// disk files where they are while the adopted domain runs; at the VM's
// first start through virtplane after that, each persistent volume not
// made yet is copied from its file (converted to the volumes' qcow2)
// instead of made blank, and its EFI variables from the domain's NVRAM.
// The files are left where they were: they are the operator's, outside
// the node data directory, and a copy cut short is simply made again.

// AdoptedSources are the files of an adopted VM (package adoption keeps
// them, checked again against the node's allowed directories on every
// call).
type AdoptedSources interface {
	// Volume is the file and format (raw or qcow2) that persistent
	// volume name of VM vmUID is copied from; ok is false when the VM
	// adopted none for it.
	Volume(vmUID, name string) (path, format string, ok bool, err error)
	// NVRAM is the EFI variable store VM vmUID's is copied from.
	NVRAM(vmUID string) (path string, ok bool, err error)
}

// FileInfo is what qemu-img says of a file read as a given format.
type FileInfo struct {
	Format      string
	VirtualSize int64
	// BackingFile and DataFile are a qcow2's backing file and external
	// data file, "" when it has none.
	BackingFile string
	DataFile    string
}

// InfoAs runs qemu-img info on path read as format, never probed (a raw
// file holding a qcow2 header is the guest's data, not an image), and
// shared (-U): an adopted domain's QEMU has the file open.
func (q QemuImg) InfoAs(ctx context.Context, path, format string) (FileInfo, error) {
	return q.info(ctx, path, format)
}

// Import writes a standalone qcow2 copy of src (read as format) to dst.
// Not shared: qemu-img takes src's lock, so a QEMU that still runs on
// the file (the adopted domain, or another started by hand) fails the
// copy instead of tearing it.
func (q QemuImg) Import(ctx context.Context, src, format, dst string) error {
	return q.convert(ctx, format, src, "qcow2", dst, false)
}

// Importer copies adopted disk files (QemuImg).
type Importer interface {
	Import(ctx context.Context, src, format, dst string) error
}

// importAdopted makes the persistent volume d at path from the file the
// VM adopted for it, if any (done says it did). Like provisionFile it
// makes the volume aside and renames it into place; a failure leaves the
// VMI waiting (DataVolumeError) and is retried.
func (p *Preparer) importAdopted(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI, d *apiv1.Disk, path string) (done bool, err error) {
	if p.opts.Adopted == nil || rec.VMUID == "" {
		return false, nil
	}
	if _, err := os.Stat(path); err == nil {
		return false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, fmt.Errorf("disk %q: %w", d.GetName(), err)
	}
	src, format, ok, err := p.opts.Adopted.Volume(rec.VMUID, d.GetName())
	if err != nil {
		return false, volumeError(d.GetName(), fmt.Errorf("its adopted file: %w", err))
	}
	if !ok {
		return false, nil
	}
	ref := apiv1.Ref(vmi.GetMetadata().GetNamespace(), vmi.GetMetadata().GetName())
	if p.opts.Progress != nil {
		msg := fmt.Sprintf("copying the adopted disk %s into persistent volume %q", src, d.GetName())
		if err := p.opts.Progress.Provisioning(ctx, vmi, msg); err != nil {
			return false, err
		}
	}
	p.log.Info("copying an adopted disk into its persistent volume", "vmi", ref, "volume", d.GetName(), "from", src, "format", format)
	start := p.opts.Clock.Now()
	if err := nodedir.MkdirTraversable(filepath.Dir(path)); err != nil {
		return false, fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	if err := p.importer().Import(ctx, src, format, tmp); err != nil {
		_ = os.Remove(tmp)
		return false, volumeError(d.GetName(), fmt.Errorf("copying the adopted file %s (is a QEMU still running on it?): %w", src, err))
	}
	if err := fsutil.Commit(tmp, path); err != nil {
		return false, fmt.Errorf("disk %q: %w", d.GetName(), err)
	}
	p.log.Info("adopted disk copied", "vmi", ref, "volume", d.GetName(), "took", p.opts.Clock.Since(start).Round(time.Millisecond))
	return true, nil
}

func (p *Preparer) importer() Importer {
	if im, ok := p.opts.Images.(Importer); ok {
		return im
	}
	return QemuImg{}
}

// importAdoptedNVRAM copies the adopted domain's EFI variables to path
// (the VM's store on the node) unless it exists: the guest keeps its boot
// entries.
func (p *Preparer) importAdoptedNVRAM(rec *state.VMI, path string) error {
	if p.opts.Adopted == nil || rec.VMUID == "" {
		return nil
	}
	if _, err := os.Stat(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		return err
	}
	src, ok, err := p.opts.Adopted.NVRAM(rec.VMUID)
	if err != nil || !ok {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("the adopted EFI variables: %w", err)
	}
	defer in.Close()
	tmp := path + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("copying the adopted EFI variables: %w", err)
	}
	if err := out.Close(); err != nil {
		return err
	}
	p.log.Info("adopted EFI variables copied", "vm_uid", rec.VMUID, "from", src)
	return fsutil.Commit(tmp, path)
}
