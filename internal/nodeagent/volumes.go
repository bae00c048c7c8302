package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/cloudinit"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// ReasonDataVolumeError marks a persistent volume that could not be
// provisioned (Synchronized=False); the VM shows printable status
// DataVolumeError, as KubeVirt does for a failed DataVolume.
const ReasonDataVolumeError = "DataVolumeError"

// persistentPath is where a persistent volume lives: with its VM, so it
// outlives instances, or with a bare VMI, whose lifetime it shares.
func (a *Agent) persistentPath(rec *state.VMI, volume string) string {
	dir := filepath.Join(rec.Dir, "volumes")
	if rec.VMUID != "" {
		dir = filepath.Join(a.layout.VMDir(rec.VMUID), "volumes")
	}
	return filepath.Join(dir, filepath.Base(volume)+".qcow2")
}

// preparePersistentDisk provisions a persistent volume on first use (a
// blank disk, or a copy of an image grown to the requested size) and
// attaches it. While the copy runs the VMI carries Provisioning=True; a
// failure leaves the VMI waiting with Synchronized=False/DataVolumeError
// and is retried with backoff.
func (a *Agent) preparePersistentDisk(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI, d *apiv1.Disk, pv *apiv1.PersistentVolume) (*launcherpb.DiskSource, error) {
	path := a.persistentPath(rec, d.GetName())
	src := diskSource(d)
	src.Path, src.Format = path, "qcow2"
	if rec.VMUID != "" {
		if err := a.layout.EnsureVMDir(rec.VMUID, vmi.GetMetadata().GetNamespace(), vmi.GetMetadata().GetName()); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(path); err == nil {
		return src, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("disk %q: %w", d.GetName(), err)
	}

	volErr := func(err error) error {
		return &prepareError{reason: ReasonDataVolumeError, retry: true, err: fmt.Errorf("persistent volume %q: %w", d.GetName(), err)}
	}
	q, err := resource.ParseQuantity(pv.GetSize())
	if err != nil || q.Sign() <= 0 {
		return nil, volErr(fmt.Errorf("size %q is not a positive quantity", pv.GetSize()))
	}
	size := q.Value()
	var base string
	var info ImageInfo
	if pv.GetImage() != "" {
		if base, err = validation.ResolveImagePath(a.opts.ImageDir, pv.GetImage()); err != nil {
			return nil, volErr(err)
		}
		if info, err = a.opts.Images.Info(ctx, base); err != nil {
			return nil, volErr(fmt.Errorf("reading image %s: %w", pv.GetImage(), err))
		}
		if size < info.VirtualSize {
			return nil, volErr(fmt.Errorf("size %s is below the virtual size of image %s (%d bytes)", pv.GetSize(), pv.GetImage(), info.VirtualSize))
		}
	}

	msg := fmt.Sprintf("creating persistent volume %q (%s)", d.GetName(), pv.GetSize())
	if base != "" {
		msg = fmt.Sprintf("copying image %s into persistent volume %q (%s)", pv.GetImage(), d.GetName(), pv.GetSize())
	}
	if _, err := a.writeStatus(ctx, vmi, provisioningStatus(msg)); err != nil && !errors.Is(err, errVMIGone) {
		return nil, err
	}
	a.log.Info("provisioning persistent volume", "vmi", vmiKey(vmi), "volume", d.GetName(), "size", pv.GetSize(), "image", pv.GetImage())
	start := a.now()
	if err := nodedir.MkdirTraversable(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	// Made aside and renamed: a half-written volume must never pass for
	// the guest's data after a crash.
	tmp := path + ".tmp"
	_ = os.Remove(tmp)
	if base == "" {
		err = a.opts.Images.CreateBlank(ctx, tmp, size)
	} else {
		err = a.opts.Images.CopyResized(ctx, base, info.Format, tmp, size)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return nil, volErr(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("disk %q: %w", d.GetName(), err)
	}
	a.log.Info("persistent volume ready", "vmi", vmiKey(vmi), "volume", d.GetName(), "took", a.now().Sub(start).Round(time.Millisecond))
	return src, nil
}

// prepareCloudInitDisk writes the NoCloud seed ISO of the VMI: meta-data
// with instance-id = the VMI uid (cloud-init re-runs its per-instance
// modules for each new instance) and local-hostname = the VM name.
func (a *Agent) prepareCloudInitDisk(vmi *apiv1.VirtualMachineInstance, d *apiv1.Disk, ci *apiv1.CloudInitNoCloud, disksDir string) (*launcherpb.DiskSource, error) {
	path := filepath.Join(disksDir, filepath.Base(d.GetName())+".iso")
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
		return nil, &prepareError{reason: ReasonPrepareFailed, err: fmt.Errorf("disk %q: %w", d.GetName(), err)}
	}
	return src, nil
}

// provisioningStatus sets Provisioning=True while a volume is created.
func provisioningStatus(msg string) func(*apiv1.VirtualMachineInstanceStatus, time.Time) {
	return func(st *apiv1.VirtualMachineInstanceStatus, now time.Time) {
		st.Conditions = apiv1.SetCondition(st.Conditions, &apiv1.Condition{
			Type: apiv1.ConditionProvisioning, Status: apiv1.ConditionTrue, Reason: "Provisioning", Message: msg,
		}, now)
	}
}
