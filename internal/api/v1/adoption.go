package apiv1

// Names of VirtualMachineAdoption (adoption.proto): the kind, its phases
// and the annotation that ties a VM to the adoption that made it. One
// definition each; docs/adopt.md explains them.
const (
	KindAdoption = "VirtualMachineAdoption"

	// AnnotationAdoption on the template of a VM an adoption made holds
	// the adoption's uid; its instances carry it. The node that made the
	// adoption's mapping takes the domain over for the VM's first
	// instance only, and copies the domain's disk files into the VM's
	// volumes at its first start after that (both decided by the node's
	// own record, never by this annotation alone).
	AnnotationAdoption = "virtplane.io/adoption"
)

// Phases of an adoption.
const (
	AdoptionPending  = "Pending"
	AdoptionMapped   = "Mapped"
	AdoptionRefused  = "Refused"
	AdoptionAdopting = "Adopting"
	AdoptionAdopted  = "Adopted"
	AdoptionFailed   = "Failed"
)

// AdoptionFinal reports whether phase ends an adoption: nothing changes
// it afterwards. A dry run ends Mapped.
func AdoptionFinal(a *VirtualMachineAdoption) bool {
	switch a.GetStatus().GetPhase() {
	case AdoptionRefused, AdoptionAdopted, AdoptionFailed:
		return true
	case AdoptionMapped:
		return a.GetSpec().GetDryRun()
	}
	return false
}

// ServerOwnedTemplateAnnotation reports whether key, an annotation of a
// VM's instance template, is the server's: set when the server makes the
// VM, never by a client (the API refuses a change of it), and not
// managed by clients that write templates (the provider keeps it as
// stored and does not show it).
func ServerOwnedTemplateAnnotation(key string) bool { return key == AnnotationAdoption }

// AdoptionOf is the adoption uid a VMI (or a VM template) carries, "" for
// none.
func AdoptionOf(md *ObjectMeta) string { return md.GetAnnotations()[AnnotationAdoption] }
