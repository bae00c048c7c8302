package nodeagent

import (
	"errors"
	"fmt"
	"path/filepath"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/client/remotestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/export"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
)

// newExportServer makes the export server when the node serves exports
// (Options.ExportAddress), with the node's export certificate, which
// registration hands the server.
func (a *Agent) newExportServer() error {
	o := a.opts
	if o.ExportAddress == "" {
		return nil
	}
	if o.API.Exports == nil {
		return errors.New("an export address needs the export API")
	}
	ap, err := validation.ParseExportAddress(o.ExportAddress)
	if err != nil {
		return fmt.Errorf("export address %q: %w", o.ExportAddress, err)
	}
	// Beside the state database, 0600 in 0700: the key never leaves the
	// node.
	cert, err := pki.EnsureExportCertificate(filepath.Join(a.layout.Root, "export-tls"), o.NodeName, ap.Addr(), o.Clock.Now())
	if err != nil {
		return fmt.Errorf("export certificate: %w", err)
	}
	eo := export.Options{
		NodeName: o.NodeName, Watch: remotestore.NewExports(o.API.Exports), Address: o.ExportAddress,
		Certificate: cert.TLS, Layout: a.layout, Clock: o.Clock, Logger: a.log,
	}
	if a.storage != nil {
		eo.Classes = a.storage
	}
	if a.snaps != nil {
		eo.Contents = a.snaps
	}
	s, err := export.New(eo)
	if err != nil {
		return err
	}
	a.exports, a.exportCert = s, cert.PEM
	return nil
}
