package launcher

import "context"

// DomainFacts is what `virtplane-launcher inspect-domain NAME` prints:
// one domain as libvirt has it, for the node agent to map and adopt
// (docs/adopt.md). The XML is libvirt's description of the domain, the
// live one when it runs, without secrets (no VIR_DOMAIN_XML_SECURE); it
// never leaves the node.
type DomainFacts struct {
	Name   string `json:"name"`
	UUID   string `json:"uuid"`
	State  string `json:"state"`
	Reason string `json:"reason"`
	// Persistent is false for a transient domain (virsh create).
	Persistent bool `json:"persistent"`
	// Managed says the domain carries virtplane's metadata: virtplane
	// defined it, or took it over already.
	Managed bool `json:"managed"`
	// What libvirt keeps beside the definition: snapshots, checkpoints
	// and a managed save image, which would block its undefine.
	Snapshots   int    `json:"snapshots,omitempty"`
	Checkpoints int    `json:"checkpoints,omitempty"`
	ManagedSave bool   `json:"managed_save,omitempty"`
	QEMUPid     int    `json:"qemu_pid,omitempty"`
	XML         string `json:"xml"`
}

// InspectDomain runs `launcherPath inspect-domain --libvirt-uri uri
// --qemu-pid-dir pidDir name`. A domain that does not exist is an error
// whose message says so.
func InspectDomain(ctx context.Context, launcherPath, libvirtURI, pidDir, name string) (DomainFacts, error) {
	var f DomainFacts
	args := []string{"inspect-domain", "--libvirt-uri", uriOrDefault(libvirtURI)}
	if pidDir != "" {
		args = append(args, "--qemu-pid-dir", pidDir)
	}
	// "--" ends the flags: the name is the operator's, and starts with a
	// letter or digit anyway (validation.CheckDomainName).
	err := runJSON(ctx, &f, launcherPath, append(args, "--", name)...)
	return f, err
}
