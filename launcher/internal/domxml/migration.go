package domxml

import (
	"errors"
	"fmt"
	"strings"

	"libvirt.org/go/libvirtxml"
)

// DestinationXML completes dest, the target's migratable XML of the
// receiving domain, with the firmware libvirt resolved for the running
// source domain (source, its live XML), and returns the XML the source
// migrates with.
//
// An EFI guest is defined by feature (<os firmware='efi'>, autoselection),
// and libvirt 9.0 resolves that only when it starts a domain from scratch,
// never for an incoming migration: given the target's XML as it is, the
// target's libvirtd starts QEMU without any firmware (the stream is then
// refused: "Unknown ramblock system.flash0") or, when the NVRAM file does
// not exist yet, crashes (docs/notes/storage-probes-efi.md, Q1). So the
// destination gets the source's <loader> and NVRAM template, in the form
// libvirt itself sends for a resolved domain (no firmware attribute, no
// <firmware> features), while the NVRAM element stays the target's own:
// its path on that node, or its RBD image. The target's persistent
// definition is left in the autoselection form (the caller passes dest
// unchanged as the persistent XML).
//
// The destination's devices are laid out as the source's
// (alignDevices): disks plugged into or unplugged from the source while
// it ran change its layout.
//
// A domain without EFI firmware whose devices match is returned as it
// came. An EFI destination that cannot be completed is an error, never
// sent.
func DestinationXML(dest, source string) (string, error) {
	var d, s libvirtxml.Domain
	if err := d.Unmarshal(dest); err != nil {
		return "", fmt.Errorf("parse the destination XML: %w", err)
	}
	if err := s.Unmarshal(source); err != nil {
		return "", fmt.Errorf("parse the source domain's XML: %w", err)
	}
	aligned, err := alignDevices(&d, &s)
	if err != nil {
		return "", err
	}
	unchanged := func() (string, error) {
		if !aligned {
			return dest, nil
		}
		return marshalDestination(&d)
	}
	var loader *libvirtxml.DomainLoader
	var srcNVRAM *libvirtxml.DomainNVRam
	if s.OS != nil {
		loader, srcNVRAM = s.OS.Loader, s.OS.NVRam
	}
	dos := d.OS
	autoselect := dos != nil && dos.Firmware == "efi"
	switch {
	case dos != nil && dos.Loader != nil && dos.Loader.Path != "":
		// Resolved already (not what the launcher defines, but complete).
		return unchanged()
	case !autoselect && (loader == nil || loader.Path == ""):
		return unchanged() // no firmware to carry (SeaBIOS)
	case !autoselect:
		return "", fmt.Errorf("the source runs firmware %s but the destination XML asks for none: the target's domain would not match", loader.Path)
	case loader == nil || loader.Path == "":
		return "", errors.New("the destination XML asks for EFI firmware (firmware='efi') but the source's running domain names no loader " +
			"to give it; libvirt 9.0 does not select firmware for an incoming migration")
	case dos.NVRam == nil:
		return "", errors.New("the destination XML asks for EFI firmware without an NVRAM store")
	}
	l := *loader
	dos.Loader = &l
	// The element's text is the file's path; a network store has none,
	// only the indentation libvirt formatted around its <source>.
	dos.NVRam.NVRam = strings.TrimSpace(dos.NVRam.NVRam)
	dos.Firmware, dos.FirmwareInfo = "", nil
	if srcNVRAM != nil {
		dos.NVRam.Template, dos.NVRam.TemplateFormat = srcNVRAM.Template, srcNVRAM.TemplateFormat
	}
	// A firmware that requires SMM (Secure Boot builds) had libvirt turn
	// SMM on in the source; the target's QEMU needs the same machine.
	if s.Features != nil && s.Features.SMM != nil && s.Features.SMM.State == "on" {
		if d.Features == nil {
			d.Features = &libvirtxml.DomainFeatureList{}
		}
		if d.Features.SMM == nil {
			d.Features.SMM = &libvirtxml.DomainFeatureSMM{State: "on"}
		}
	}
	return marshalDestination(&d)
}

func marshalDestination(d *libvirtxml.Domain) (string, error) {
	out, err := d.Marshal()
	if err != nil {
		return "", fmt.Errorf("marshal the destination XML: %w", err)
	}
	return out, nil
}
