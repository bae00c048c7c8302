package validation

import (
	"fmt"
	"path/filepath"
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Adoptions (adoption.proto, docs/adopt.md): the spec as an admin
// submits it, and the status as the node and the controller write it.

// MaxDomainNameLen bounds an adopted domain's name: it becomes the name
// of files (the launcher's log and lock, libvirt's <name>.pid), which
// hold 255 bytes with their suffixes.
const MaxDomainNameLen = 128

// MaxAdoptionItems bounds the refusals and notes of an adoption: a domain
// has at most a few hundred elements worth a word (the node says how many
// more there were in the last one).
const MaxAdoptionItems = 256

// domainNameRegexp is the names of domains virtplane adopts: what libvirt
// allows and a file name holds as it is (no "/", no leading "." or "-",
// no spaces or shell characters): letters, digits, and "._+-".
var domainNameRegexp = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._+-]*$`)

// CheckDomainName is the one rule for the name of a domain that is
// adopted: the API checks the spec with it, and the node and the
// launcher the name they are about to put in file names.
func CheckDomainName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("a domain name is required")
	case len(name) > MaxDomainNameLen:
		return fmt.Errorf("must be at most %d characters", MaxDomainNameLen)
	case !domainNameRegexp.MatchString(name):
		return fmt.Errorf("must start with a letter or digit and hold only letters, digits and '._+-' (it becomes part of file names on the node)")
	}
	return nil
}

var (
	adoptionPhases = []string{"", apiv1.AdoptionPending, apiv1.AdoptionMapped, apiv1.AdoptionRefused,
		apiv1.AdoptionAdopting, apiv1.AdoptionAdopted, apiv1.AdoptionFailed}
	adoptionRunStrategies = []string{apiv1.RunStrategyAlways, apiv1.RunStrategyManual}
	adoptedDiskFormats    = []string{"raw", "qcow2"}
)

// DefaultAdoption fills the namespace and the run strategy (Always: the
// domain runs).
func DefaultAdoption(a *apiv1.VirtualMachineAdoption) {
	if a == nil {
		return
	}
	DiscardUnknown(a)
	a.Metadata = defaultMetadata(a.Metadata)
	if a.Spec == nil {
		a.Spec = &apiv1.VirtualMachineAdoptionSpec{}
	}
	if a.Spec.RunStrategy == "" {
		a.Spec.RunStrategy = apiv1.RunStrategyAlways
	}
}

// ValidateAdoption checks an adoption as submitted (after
// DefaultAdoption). Its name is the VM's, so a DNS-1123 label.
func ValidateAdoption(a *apiv1.VirtualMachineAdoption) field.ErrorList {
	errs := ValidateObjectMeta(a.GetMetadata(), true, field.NewPath("metadata"))
	spec := field.NewPath("spec")
	sp := a.GetSpec()
	if sp == nil {
		return append(errs, field.Required(spec, ""))
	}
	errs = append(errs, ValidateNodeName(sp.GetNodeName(), spec.Child("node_name"))...)
	if err := CheckDomainName(sp.GetDomainName()); err != nil {
		if sp.GetDomainName() == "" {
			errs = append(errs, field.Required(spec.Child("domain_name"), "the libvirt domain to adopt"))
		} else {
			errs = append(errs, field.Invalid(spec.Child("domain_name"), clip(sp.GetDomainName()), err.Error()))
		}
	}
	errs = append(errs, oneOf(sp.GetRunStrategy(), spec.Child("run_strategy"), adoptionRunStrategies)...)
	return append(errs, validateReplicaSize(a)...)
}

// ValidateAdoptionStatus checks an adoption's status as a node or the
// controller writes it: known phase, bounded lists and strings, uids in
// their form. The mapped spec is only bounded here (the whole object's
// size): the controller validates it as a VM with the server's policy
// before it makes anything of it.
func ValidateAdoptionStatus(st *apiv1.VirtualMachineAdoptionStatus, path *field.Path) field.ErrorList {
	if st == nil {
		return nil
	}
	errs := oneOf(st.GetPhase(), path.Child("phase"), adoptionPhases)
	errs = append(errs, validateStatusMessage(st.GetMessage(), path.Child("message"))...)
	errs = append(errs, optionalUID(st.GetDomainUuid(), path.Child("domain_uuid"))...)
	errs = append(errs, optionalUID(st.GetVmUid(), path.Child("vm_uid"))...)
	errs = append(errs, optionalUID(st.GetVmiUid(), path.Child("vmi_uid"))...)
	errs = append(errs, validateStatusMessage(st.GetDomainState(), path.Child("domain_state"))...)
	if st.GetQemuPid() < 0 {
		errs = append(errs, field.Invalid(path.Child("qemu_pid"), st.GetQemuPid(), "must not be negative"))
	}
	rp := path.Child("refusals")
	if n := len(st.GetRefusals()); n > MaxAdoptionItems {
		errs = append(errs, field.TooMany(rp, n, MaxAdoptionItems))
	} else {
		for i, r := range st.GetRefusals() {
			errs = append(errs, validateStatusMessage(r.GetElement(), rp.Index(i).Child("element"))...)
			errs = append(errs, validateStatusMessage(r.GetReason(), rp.Index(i).Child("reason"))...)
		}
	}
	np := path.Child("notes")
	if n := len(st.GetNotes()); n > MaxAdoptionItems {
		errs = append(errs, field.TooMany(np, n, MaxAdoptionItems))
	} else {
		for i, s := range st.GetNotes() {
			errs = append(errs, validateStatusMessage(s, np.Index(i))...)
		}
	}
	dp := path.Child("disks")
	if n := len(st.GetDisks()); n > MaxDevices {
		return append(errs, field.TooMany(dp, n, MaxDevices))
	}
	seen := nameIndex{}
	for i, d := range st.GetDisks() {
		p := dp.Index(i)
		errs = append(errs, uniqueName(d.GetName(), p.Child("name"), i, seen, true)...)
		if f := d.GetPath(); !filepath.IsAbs(f) || filepath.Clean(f) != f || len(f) > maxNodePathLen {
			errs = append(errs, field.Invalid(p.Child("path"), clip(f), "must be an absolute, clean path"))
		}
		errs = append(errs, oneOf(d.GetFormat(), p.Child("format"), adoptedDiskFormats)...)
		if d.GetVirtualSizeBytes() < 0 {
			errs = append(errs, field.Invalid(p.Child("virtual_size_bytes"), d.GetVirtualSizeBytes(), "must not be negative"))
		}
	}
	return errs
}
