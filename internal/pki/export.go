package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"time"
)

// ExportCertValidity is how long a node's export certificate is valid;
// the node agent makes a new one at a start within renewBefore of the end.
const ExportCertValidity = 365 * 24 * time.Hour

// ExportOrganization is the subject organization of export certificates.
const ExportOrganization = "virtplane:export"

// ExportCertificate is the key and self-signed certificate a node agent
// serves VM exports with (docs/export.md). It is not signed by the
// cluster CA on purpose: a CA-signed server certificate for an address
// the node chose would let a hostile node pass for the API server to
// every client that trusts the CA. Clients trust this certificate alone,
// for the exports of this node, from the export's status, which the
// server filled from the node's authenticated registration.
type ExportCertificate struct {
	PEM []byte
	TLS tls.Certificate
}

// EnsureExportCertificate loads the node's export certificate from dir
// (export.crt, export.key 0600 in a 0700 directory), or makes a new one
// when there is none, it names another IP, or it is close to expiry.
func EnsureExportCertificate(dir, node string, ip netip.Addr, now time.Time) (*ExportCertificate, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, err
	}
	certFile, keyFile := filepath.Join(dir, "export.crt"), filepath.Join(dir, "export.key")
	cert, key, err := loadPair(certFile, keyFile)
	if err != nil || RenewalDue(cert, now) || len(cert.IPAddresses) != 1 || !cert.IPAddresses[0].Equal(ip.AsSlice()) {
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			return nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(),
			Subject:      pkix.Name{CommonName: node, Organization: []string{ExportOrganization}},
			NotBefore:    now.Add(-5 * time.Minute),
			NotAfter:     now.Add(ExportCertValidity),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			IPAddresses:  []net.IP{ip.AsSlice()},
			// Not a CA: a client that trusts it trusts nothing it signs.
			BasicConstraintsValid: true,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
		if err != nil {
			return nil, fmt.Errorf("making the export certificate: %w", err)
		}
		if err := writePair(certFile, keyFile, der, key); err != nil {
			return nil, err
		}
		if cert, err = x509.ParseCertificate(der); err != nil {
			return nil, err
		}
	}
	return &ExportCertificate{
		PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}),
		TLS: tls.Certificate{Certificate: [][]byte{cert.Raw}, PrivateKey: key, Leaf: cert},
	}, nil
}
