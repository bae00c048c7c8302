package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/virt"
)

// inspectDomain prints launcher.DomainFacts of the domain named by the
// one argument: what the node agent maps when it adopts a domain
// virtplane did not define (docs/adopt.md). It reads; it changes nothing.
func inspectDomain(args []string) int {
	var uri, pidDir string
	fs := flag.NewFlagSet("inspect-domain", flag.ContinueOnError)
	fs.StringVar(&uri, "libvirt-uri", defaultURI(), "libvirt connection URI (env VIRTPLANE_LIBVIRT_URI)")
	fs.StringVar(&pidDir, "qemu-pid-dir", driver.DefaultQEMUPidDir, "where libvirtd writes QEMU pid files")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "virtplane-launcher inspect-domain: one domain name is required")
		return 2
	}
	name := fs.Arg(0)
	if err := validation.CheckDomainName(name); err != nil {
		return fail("inspect-domain", fmt.Errorf("domain name %q: %w", name, err))
	}
	conn, err := openLibvirt(uri, virt.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return fail("inspect-domain", err)
	}
	defer conn.Close()
	dom, err := conn.LookupDomainByName(name)
	if errors.Is(err, driver.ErrNoDomain) {
		return fail("inspect-domain", fmt.Errorf("no domain %q on %s", name, uri))
	}
	if err != nil {
		return fail("inspect-domain", err)
	}
	defer dom.Free()
	f, err := domainFacts(dom, name, pidDir)
	if err != nil {
		return fail("inspect-domain", err)
	}
	return printJSON(f)
}

func domainFacts(dom driver.Domain, name, pidDir string) (launcher.DomainFacts, error) {
	f := launcher.DomainFacts{Name: name}
	var err error
	if f.UUID, err = dom.GetUUIDString(); err != nil {
		return f, err
	}
	st, reason, err := dom.GetState()
	if err != nil {
		return f, err
	}
	f.State, f.Reason = st.String(), driver.ReasonName(st, reason)
	if p, ok := dom.(driver.PersistentDomain); ok {
		if f.Persistent, err = p.IsPersistent(); err != nil {
			return f, err
		}
	}
	if s, ok := dom.(driver.StatefulDomain); ok {
		if f.Snapshots, f.Checkpoints, f.ManagedSave, err = s.SavedState(); err != nil {
			return f, err
		}
	}
	switch _, err := dom.GetMetadata(domxml.Namespace); {
	case err == nil:
		f.Managed = true
	case !errors.Is(err, driver.ErrNoMetadata):
		return f, err
	}
	if st.Active() {
		f.QEMUPid = driver.ReadQEMUPid(pidDir, name)
	}
	if f.XML, err = dom.GetXMLDesc(); err != nil {
		return f, err
	}
	return f, nil
}
