package pki

import (
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"
)

// UserOrganization is the subject organization of the client
// certificates of users and service accounts. It differs from
// NodeOrganization, so a user's certificate never authenticates a node
// (NodeName) and a node's never a user (UserSubject).
const UserOrganization = "virtplane:users"

// Subject kinds of a user certificate's common name.
const (
	UserCertUser           = "user"
	UserCertServiceAccount = "serviceaccount"
)

// UserCommonName is the common name of the certificate of a user
// ("user:alice") or of a namespace's service account
// ("serviceaccount:ci:deployer"). Names are DNS labels, which hold no
// colon, so the form is unambiguous.
func UserCommonName(kind, namespace, name string) string {
	if kind == UserCertServiceAccount {
		return kind + ":" + namespace + ":" + name
	}
	return kind + ":" + name
}

// UserSubject returns whom a verified client certificate names, and false
// for any certificate that is not a user's or service account's.
func UserSubject(cert *x509.Certificate) (kind, namespace, name string, ok bool) {
	if !slices.Equal(cert.Subject.Organization, []string{UserOrganization}) ||
		!slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		return "", "", "", false
	}
	parts := strings.Split(cert.Subject.CommonName, ":")
	switch {
	case len(parts) == 2 && parts[0] == UserCertUser && parts[1] != "":
		return parts[0], "", parts[1], true
	case len(parts) == 3 && parts[0] == UserCertServiceAccount && parts[1] != "" && parts[2] != "":
		return parts[0], parts[1], parts[2], true
	}
	return "", "", "", false
}

// SignUserCSR signs a client certificate with common name cn (made by
// UserCommonName) valid from now for validity (at most the CA's life).
// Only the request's public key is taken: subject, usages and validity
// are the server's, whatever the request asks for.
func (ca *CA) SignUserCSR(csrPEM []byte, cn string, now time.Time, validity time.Duration) (*x509.Certificate, []byte, error) {
	csr, err := ParseCSR(csrPEM)
	if err != nil {
		return nil, nil, err
	}
	if err := checkPublicKey(csr.PublicKey); err != nil {
		return nil, nil, fmt.Errorf("csr: %w", err)
	}
	if validity <= 0 {
		return nil, nil, fmt.Errorf("validity must be positive, got %s", validity)
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{UserOrganization}},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, csr.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing user certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}
