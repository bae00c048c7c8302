package adoption

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/virtplane/terraform-provider-virtplane/internal/adopt"
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
)

// Claim is an instance's take-over of its VM's adopted domain.
type Claim struct {
	// Domain and UUID are the domain's: the instance's launcher manages
	// the domain of that name and takes it over if it has that UUID.
	Domain, UUID string
}

// RefusedError is a take-over the node will not do: the instance fails
// with it.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string { return e.Reason }

// Claim decides whether vmi, whose VM is vmUID, takes over its VM's
// adopted domain: only the VM's first instance placed on the node that
// mapped the domain does, while the adoption is Adopting, and only the
// domain the node reported (same name, same UUID, mapping to the same
// volumes). nil, nil: the instance runs as any other (no adoption, or a
// later instance, whose volumes are copied from the record's files).
// A *RefusedError fails the instance; other errors are retried.
func (r *Role) Claim(ctx context.Context, vmi *apiv1.VirtualMachineInstance, vmUID string) (*Claim, error) {
	uid := apiv1.AdoptionOf(vmi.GetMetadata())
	if uid == "" || vmUID == "" {
		return nil, nil
	}
	md := vmi.GetMetadata()
	dir, err := r.opts.Layout.VMDir(vmUID)
	if err != nil {
		return nil, &RefusedError{Reason: err.Error()}
	}
	rec, err := readRecord(dir)
	if err != nil {
		return nil, err
	}
	if rec != nil {
		if rec.VMIUID == md.GetUid() && rec.State != stateFailed && rec.Adoption == uid {
			return &Claim{Domain: rec.Domain, UUID: rec.UUID}, nil // this instance, again
		}
		return nil, nil
	}
	a, err := r.adoption(ctx, md.GetNamespace(), md.GetName())
	if err != nil {
		return nil, err
	}
	switch st := a.GetStatus(); {
	case a.GetMetadata().GetUid() != uid:
		return nil, &RefusedError{Reason: fmt.Sprintf("the VM names adoption %s, but adoption %s is another (%s)", uid, apiv1.Ref(md.GetNamespace(), md.GetName()), a.GetMetadata().GetUid())}
	case st.GetPhase() != apiv1.AdoptionAdopting || st.GetVmUid() != vmUID:
		return nil, &RefusedError{Reason: fmt.Sprintf("adoption %s is %s for VM %q, not Adopting for this one", uid, st.GetPhase(), st.GetVmUid())}
	}
	// The domain now: the one reported, mapping to this VM's volumes.
	ictx, cancel := context.WithTimeout(ctx, r.opts.InspectTimeout)
	m := r.mapDomain(ictx, a)
	cancel()
	fail := func(format string, args ...any) (*Claim, error) {
		reason := fmt.Sprintf(format, args...)
		if err := r.recordFailure(dir, a, vmUID, md.GetUid(), reason); err != nil {
			return nil, err
		}
		r.queue(md.GetNamespace(), md.GetName())
		return nil, &RefusedError{Reason: reason}
	}
	switch {
	case len(m.status.GetRefusals()) > 0:
		f := m.status.GetRefusals()[0]
		return fail("the domain can no longer be adopted: %s: %s", f.GetElement(), f.GetReason())
	case m.facts.UUID != a.GetStatus().GetDomainUuid():
		return fail("domain %s is %s now, not the domain %s that was mapped", a.GetSpec().GetDomainName(), m.facts.UUID, a.GetStatus().GetDomainUuid())
	case !sameVolumes(m.res.Disks, vmi.GetSpec()):
		return fail("the domain's disks no longer match the VM's volumes (the domain or the VM changed since the mapping)")
	}
	if err := r.opts.Layout.EnsureVMDir(vmUID, md.GetNamespace(), md.GetName()); err != nil {
		return nil, &RefusedError{Reason: err.Error()}
	}
	rec = &Record{
		Adoption: uid, Namespace: md.GetNamespace(), Name: md.GetName(), VMUID: vmUID, VMIUID: md.GetUid(),
		Domain: m.facts.Name, UUID: m.facts.UUID, State: stateClaimed, Disks: m.res.Disks, NVRAM: m.res.NVRAM,
	}
	if err := writeRecord(dir, rec); err != nil {
		return nil, err
	}
	r.log.Info("instance claims the adopted domain", "vmi", apiv1.Ref(md.GetNamespace(), md.GetName()), "vmi_uid", md.GetUid(),
		"domain", rec.Domain, "uuid", rec.UUID, "disks", len(rec.Disks))
	return &Claim{Domain: rec.Domain, UUID: rec.UUID}, nil
}

// adoption reads the adoption of the VM namespace/name from the API: the
// informer may not have its Adopting yet when the VM's instance comes.
func (r *Role) adoption(ctx context.Context, namespace, name string) (*apiv1.VirtualMachineAdoption, error) {
	cctx, cancel := context.WithTimeout(ctx, r.opts.CallTimeout)
	defer cancel()
	a, err := r.opts.API.Get(cctx, &apiv1.GetAdoptionRequest{Key: &apiv1.ObjectKey{Namespace: namespace, Name: name}})
	switch status.Code(err) {
	case codes.OK:
		return a, nil
	case codes.NotFound, codes.PermissionDenied:
		return nil, &RefusedError{Reason: fmt.Sprintf("the VM was made by an adoption, but adoption %s is gone (or not this node's)", apiv1.Ref(namespace, name))}
	}
	return nil, fmt.Errorf("reading adoption %s: %w", apiv1.Ref(namespace, name), err)
}

// sameVolumes reports whether the domain's file disks are the instance's
// persistent volumes, by name.
func sameVolumes(disks []adopt.Disk, spec *apiv1.VirtualMachineInstanceSpec) bool {
	var want, got []string
	for _, d := range disks {
		want = append(want, d.Name)
	}
	for _, v := range spec.GetVolumes() {
		if v.GetPersistent() != nil {
			got = append(got, v.GetName())
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	return slices.Equal(want, got)
}

func (r *Role) recordFailure(dir string, a *apiv1.VirtualMachineAdoption, vmUID, vmiUID, reason string) error {
	md := a.GetMetadata()
	if err := r.opts.Layout.EnsureVMDir(vmUID, md.GetNamespace(), md.GetName()); err != nil {
		return err
	}
	return writeRecord(dir, &Record{Adoption: md.GetUid(), Namespace: md.GetNamespace(), Name: md.GetName(), VMUID: vmUID,
		VMIUID: vmiUID, Domain: a.GetSpec().GetDomainName(), State: stateFailed, Message: reason})
}

// TookOver records that the instance vmiUID of VM vmUID took its domain
// over (its launcher's Sync succeeded), QEMU being qemuPid, and has the
// adoption reported Adopted.
func (r *Role) TookOver(vmUID, vmiUID string, qemuPid int) error {
	return r.update(vmUID, vmiUID, func(rec *Record) {
		rec.State, rec.QEMUPid = stateTaken, qemuPid
	})
}

// TakeOverFailed records that the instance could not take the domain
// over, and has the adoption reported Failed.
func (r *Role) TakeOverFailed(vmUID, vmiUID, reason string) error {
	return r.update(vmUID, vmiUID, func(rec *Record) {
		if rec.State != stateTaken {
			rec.State, rec.Message = stateFailed, reason
		}
	})
}

func (r *Role) update(vmUID, vmiUID string, change func(*Record)) error {
	dir, err := r.opts.Layout.VMDir(vmUID)
	if err != nil {
		return err
	}
	rec, err := readRecord(dir)
	if err != nil || rec == nil || rec.VMIUID != vmiUID {
		return err
	}
	before := *rec
	change(rec)
	if before.State == rec.State && before.QEMUPid == rec.QEMUPid {
		return nil
	}
	if err := writeRecord(dir, rec); err != nil {
		return err
	}
	r.queue(rec.Namespace, rec.Name)
	return nil
}

// errNoRecord: the VM adopted nothing.
var errNoRecord = errors.New("no adoption record")

// record is VM vmUID's record, checked to be its own (vm.json names the
// same VM as the record).
func (r *Role) record(vmUID string) (*Record, error) {
	dir, err := r.opts.Layout.VMDir(vmUID)
	if err != nil {
		return nil, err
	}
	rec, err := readRecord(dir)
	if err != nil {
		return nil, err
	}
	if rec == nil || rec.VMUID != vmUID {
		return nil, errNoRecord
	}
	if err := nodedir.CheckVMDirOwner(dir, rec.Namespace, rec.Name); err != nil {
		return nil, err
	}
	return rec, nil
}

// Volume is disks.AdoptedSources.Volume: the file volume name of VM vmUID
// is copied from, checked again (it is read as root, and the directory
// may have changed since the mapping).
func (r *Role) Volume(vmUID, name string) (path, format string, ok bool, err error) {
	rec, err := r.record(vmUID)
	if errors.Is(err, errNoRecord) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, err
	}
	for _, d := range rec.Disks {
		if d.Name != name {
			continue
		}
		if d.Format != "raw" && d.Format != "qcow2" {
			return "", "", false, fmt.Errorf("the record names format %q", d.Format)
		}
		real, err := adopt.CheckFile(d.Path, r.opts.Dirs)
		if err != nil {
			return "", "", false, err
		}
		return real, d.Format, true, nil
	}
	return "", "", false, nil
}

// NVRAM is disks.AdoptedSources.NVRAM.
func (r *Role) NVRAM(vmUID string) (string, bool, error) {
	rec, err := r.record(vmUID)
	if errors.Is(err, errNoRecord) {
		return "", false, nil
	}
	if err != nil || rec.NVRAM == "" {
		return "", false, err
	}
	real, err := adopt.CheckFile(rec.NVRAM, append(slices.Clone(r.opts.NVRAMDirs), r.opts.Dirs...))
	if err != nil {
		return "", false, err
	}
	return real, true, nil
}
