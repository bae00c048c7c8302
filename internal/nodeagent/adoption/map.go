package adoption

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtplane/terraform-provider-virtplane/internal/adopt"
	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
)

// mapping is one look at an adoption's domain.
type mapping struct {
	facts  launcher.DomainFacts
	res    *adopt.Result
	status *apiv1.VirtualMachineAdoptionStatus
}

// adoptableStates are the libvirt states a domain is adopted in: running
// (taken over as it runs) and shut off (taken over, then started by its
// instance like any stopped domain). A paused, crashed or suspended one
// is refused: the take-over would resume or restart it behind its
// owner's back.
var adoptableStates = []string{"Running", "Blocked", "Shutoff"}

// mapDomain inspects and maps a's domain and checks its files; every
// problem is a refusal in the status (never an error: what the node
// cannot do is the answer).
func (r *Role) mapDomain(ctx context.Context, a *apiv1.VirtualMachineAdoption) *mapping {
	st := &apiv1.VirtualMachineAdoptionStatus{}
	m := &mapping{status: st}
	refuse := func(element, format string, args ...any) {
		st.Refusals = append(st.Refusals, &apiv1.AdoptionRefusal{Element: element, Reason: fmt.Sprintf(format, args...)})
	}
	name := a.GetSpec().GetDomainName()
	if err := validation.CheckDomainName(name); err != nil {
		refuse("domain", "%q: %v", name, err)
		return m
	}
	facts, err := r.opts.Inspect.InspectDomain(ctx, name)
	if err != nil {
		refuse("domain", "node %s could not read domain %q: %v", r.opts.NodeName, name, err)
		return m
	}
	m.facts = facts
	st.DomainUuid, st.DomainState, st.QemuPid = facts.UUID, facts.State, int32(facts.QEMUPid)
	switch {
	case facts.Name != name:
		refuse("domain", "the launcher reported domain %q for %q", facts.Name, name)
		return m
	case validation.CheckUID(facts.UUID) != nil:
		refuse("domain", "libvirt reported the UUID %q", facts.UUID)
		return m
	case facts.Managed:
		refuse("domain", "virtplane manages it already (it carries virtplane's metadata)")
		return m
	case !facts.Persistent:
		refuse("domain", "it is transient (virsh create): define it first (virsh dumpxml %s > d.xml; virsh define d.xml)", name)
	case !slices.Contains(adoptableStates, facts.State):
		refuse("domain", "it is %s (%s): resume or stop it first", facts.State, facts.Reason)
	}
	// What libvirt keeps beside the definition is lost to virtplane, and
	// would keep the domain from being undefined at its first stop.
	if facts.Snapshots > 0 {
		refuse("domain", "it has %d libvirt snapshot(s): delete them first (virsh snapshot-delete); virtplane would not carry them", facts.Snapshots)
	}
	if facts.Checkpoints > 0 {
		refuse("domain", "it has %d libvirt checkpoint(s): delete them first (virsh checkpoint-delete)", facts.Checkpoints)
	}
	if facts.ManagedSave {
		refuse("domain", "it has a managed save image: start it, or remove the image (virsh managedsave-remove)")
	}
	res, err := adopt.Map(facts.XML, adopt.Rules{Dirs: r.opts.Dirs, ImageDir: r.opts.ImageDir})
	if err != nil {
		refuse("domain", "%v", err)
		return m
	}
	m.res = res
	st.Refusals = append(st.Refusals, res.Refusals...)
	st.Notes = res.Notes
	r.checkFiles(ctx, m, refuse)
	if len(st.Refusals) == 0 {
		// As the API would check the VM (without the server's host policy,
		// which the controller applies).
		vm := &apiv1.VirtualMachine{
			Metadata: &apiv1.ObjectMeta{Namespace: a.GetMetadata().GetNamespace(), Name: a.GetMetadata().GetName()},
			Spec:     &apiv1.VirtualMachineSpec{RunStrategy: apiv1.RunStrategyAlways, Template: &apiv1.VirtualMachineInstanceTemplateSpec{Spec: res.Spec}},
		}
		validation.DefaultVirtualMachine(vm)
		for _, e := range validation.ValidateVirtualMachine(vm, validation.Options{ImageDir: r.opts.ImageDir}) {
			refuse(e.Field, "%s", validationDetail(e))
		}
		res.Spec = vm.GetSpec().GetTemplate().GetSpec()
	}
	st.Spec = res.Spec
	bound(st)
	return m
}

// bound keeps st within what the API takes of a node's report
// (validation.ValidateAdoptionStatus): a domain with more refusals, notes
// or disks than that (a hostile definition can have thousands of unknown
// elements) is reported with the first ones and a count of the rest,
// rather than as a status the API refuses, which would leave the
// adoption Pending and the node inspecting the domain again and again.
// More disks than a VM may have are refused by the VM's validation
// already.
func bound(st *apiv1.VirtualMachineAdoptionStatus) {
	const keep = validation.MaxAdoptionItems - 1
	if n := len(st.Refusals); n > validation.MaxAdoptionItems {
		st.Refusals = append(st.Refusals[:keep:keep], &apiv1.AdoptionRefusal{Element: "domain",
			Reason: fmt.Sprintf("%d more refusals not listed", n-keep)})
	}
	if n := len(st.Notes); n > validation.MaxAdoptionItems {
		st.Notes = append(st.Notes[:keep:keep], fmt.Sprintf("%d more notes not listed", n-keep))
	}
	if len(st.Disks) > validation.MaxDevices {
		st.Disks = st.Disks[:validation.MaxDevices]
	}
}

// checkFiles checks each disk file: its real path inside an allowed
// directory, a regular file, and what qemu-img reads in it as the
// declared format: that format, no backing file, no external data file.
// Disks get their real paths and the volumes their sizes. An EFI
// variable store outside the allowed places is dropped with a note.
func (r *Role) checkFiles(ctx context.Context, m *mapping, refuse func(element, format string, args ...any)) {
	res, st := m.res, m.status
	for i, d := range res.Disks {
		el := fmt.Sprintf("disk %s (%s)", d.Name, d.Path)
		real, err := adopt.CheckFile(d.Path, r.opts.Dirs)
		if err != nil {
			refuse(el, "%v", err)
			continue
		}
		info, err := r.opts.Files.InfoAs(ctx, real, d.Format)
		switch {
		case err != nil:
			refuse(el, "qemu-img cannot read it as %s: %v", d.Format, err)
			continue
		case info.Format != d.Format:
			refuse(el, "qemu-img reads it as %s, the domain declares %s", info.Format, d.Format)
			continue
		case info.BackingFile != "":
			refuse(el, "a qcow2 with the backing file %s: flatten it first (virsh blockpull, or qemu-img convert while the domain is off)", info.BackingFile)
			continue
		case info.DataFile != "":
			refuse(el, "a qcow2 with the external data file %s", info.DataFile)
			continue
		case info.VirtualSize <= 0:
			refuse(el, "qemu-img reports a virtual size of %d bytes", info.VirtualSize)
			continue
		}
		res.Disks[i].Path = real
		res.SetSize(d.Name, info.VirtualSize)
		st.Disks = append(st.Disks, &apiv1.AdoptedDisk{Name: d.Name, Path: real, Format: d.Format, VirtualSizeBytes: info.VirtualSize})
	}
	if res.NVRAM != "" {
		real, err := adopt.CheckFile(res.NVRAM, append(slices.Clone(r.opts.NVRAMDirs), r.opts.Dirs...))
		if err != nil {
			res.Note("the EFI variables (%s) are not carried: %v", res.NVRAM, err)
			res.NVRAM = ""
		} else {
			res.NVRAM = real
		}
		st.Notes = res.Notes
	}
}

// validationDetail is a field error's message without its path (the
// refusal's element carries it).
func validationDetail(e *field.Error) string {
	if e.Detail != "" {
		return fmt.Sprintf("%s: %s", e.Type, e.Detail)
	}
	return e.ErrorBody()
}
