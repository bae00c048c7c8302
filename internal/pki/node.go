package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
)

// NodeOrganization is the subject organization of node client
// certificates; with the ClientAuth usage it tells a node's certificate
// from anything else the CA signs (the server's has ServerAuth only).
const NodeOrganization = "virtplane:nodes"

// DefaultNodeCertValidity is how long a node certificate is valid; nodes
// renew at two thirds of it (RenewAt).
const DefaultNodeCertValidity = 30 * 24 * time.Hour

// CA signs node certificates. Only servers hold it: the key is in their
// pki directory, never on a node.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	PEM  []byte
}

// LoadCA reads the CA of a pki directory (Ensure creates it).
func LoadCA(p Paths) (*CA, error) {
	cert, key, err := loadPair(p.CACert, p.CAKey)
	if err != nil {
		return nil, fmt.Errorf("loading CA: %w", err)
	}
	return &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})}, nil
}

// Hash is the CA's pin as kubeadm prints it: "sha256:" and the hex SHA-256
// of its SubjectPublicKeyInfo. A joining node compares it with the CA the
// server presents before it sends its bootstrap token.
func (ca *CA) Hash() string { return PublicKeyHash(ca.Cert) }

// PublicKeyHash is "sha256:<hex>" of cert's SubjectPublicKeyInfo.
func PublicKeyHash(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// SignNodeCSR checks a node's certificate request and signs a client
// certificate for node. Only the request's public key is taken: subject,
// usages and validity are the server's, whatever the request asks for.
func (ca *CA) SignNodeCSR(csrPEM []byte, node string, now time.Time, validity time.Duration) (*x509.Certificate, []byte, error) {
	csr, err := ParseCSR(csrPEM)
	if err != nil {
		return nil, nil, err
	}
	if csr.Subject.CommonName != node {
		return nil, nil, fmt.Errorf("csr: subject common name %q must be the node name %q", csr.Subject.CommonName, node)
	}
	if err := checkPublicKey(csr.PublicKey); err != nil {
		return nil, nil, fmt.Errorf("csr: %w", err)
	}
	if validity <= 0 {
		validity = DefaultNodeCertValidity
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.Cert.NotAfter) {
		notAfter = ca.Cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: node, Organization: []string{NodeOrganization}},
		// A little slack for clocks that run behind the server's.
		NotBefore:   now.Add(-5 * time.Minute),
		NotAfter:    notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, csr.PublicKey, ca.Key)
	if err != nil {
		return nil, nil, fmt.Errorf("signing node certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), nil
}

// ParseCSR decodes and checks the signature of a PEM certificate request.
func ParseCSR(csrPEM []byte) (*x509.CertificateRequest, error) {
	b, rest := pem.Decode(csrPEM)
	if b == nil || b.Type != "CERTIFICATE REQUEST" || len(strings.TrimSpace(string(rest))) != 0 {
		return nil, errors.New("csr: must be one PEM CERTIFICATE REQUEST block")
	}
	csr, err := x509.ParseCertificateRequest(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("csr: %w", err)
	}
	if err := csr.CheckSignature(); err != nil {
		return nil, fmt.Errorf("csr: signature: %w", err)
	}
	return csr, nil
}

func checkPublicKey(pub any) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() && k.Curve != elliptic.P384() {
			return errors.New("ECDSA keys must be on P-256 or P-384")
		}
	case ed25519.PublicKey:
	case *rsa.PublicKey:
		if k.N.BitLen() < 2048 {
			return fmt.Errorf("RSA keys must have at least 2048 bits, not %d", k.N.BitLen())
		}
	default:
		return fmt.Errorf("unsupported public key type %T", pub)
	}
	return nil
}

// NodeName returns the node a verified client certificate names, and false
// for any certificate that is not a node's.
func NodeName(cert *x509.Certificate) (string, bool) {
	if !slices.Equal(cert.Subject.Organization, []string{NodeOrganization}) ||
		!slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageClientAuth) || cert.Subject.CommonName == "" {
		return "", false
	}
	return cert.Subject.CommonName, true
}

// SerialHex is how NodeCredential records name a certificate.
func SerialHex(cert *x509.Certificate) string { return hex.EncodeToString(cert.SerialNumber.Bytes()) }

// RenewAt is when a holder of cert should replace it: two thirds into its
// validity, as kubelet's certificate manager does (70–90%, jittered).
func RenewAt(cert *x509.Certificate) time.Time {
	life := cert.NotAfter.Sub(cert.NotBefore)
	return cert.NotBefore.Add(life * 2 / 3)
}

// NodeKey is a node's private key and its certificate request, made on
// the node.
type NodeKey struct {
	Key    *ecdsa.PrivateKey
	CSRPEM []byte
}

// NewNodeKey makes a fresh P-256 key and a request for node's certificate.
func NewNodeKey(node string) (*NodeKey, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating node key: %w", err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject: pkix.Name{CommonName: node, Organization: []string{NodeOrganization}},
	}, key)
	if err != nil {
		return nil, fmt.Errorf("creating certificate request: %w", err)
	}
	return &NodeKey{Key: key, CSRPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})}, nil
}

// NodeIdentity is where a node keeps its credential: one file with the
// certificate and key (so that a renewal replaces both in one rename) and
// the CA it trusts.
type NodeIdentity struct {
	Dir string
}

// IdentityDir is the identity directory of a data dir.
func IdentityDir(dataDir string) NodeIdentity {
	return NodeIdentity{Dir: filepath.Join(dataDir, "identity")}
}

// PairFile holds the node's certificate and key.
func (n NodeIdentity) PairFile() string { return filepath.Join(n.Dir, "node.pem") }

// CAFile holds the CA the node verifies servers with.
func (n NodeIdentity) CAFile() string { return filepath.Join(n.Dir, "ca.crt") }

// Exists reports whether the node has joined.
func (n NodeIdentity) Exists() bool {
	_, err := os.Stat(n.PairFile())
	return err == nil
}

// Write stores a signed certificate with its key, and the CA.
func (n NodeIdentity) Write(key *ecdsa.PrivateKey, certPEM, caPEM []byte) error {
	if err := os.MkdirAll(n.Dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", n.Dir, err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding node key: %w", err)
	}
	pair := append(append([]byte{}, certPEM...), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})...)
	if len(caPEM) > 0 {
		if err := fsutil.WriteFileAtomic(n.CAFile(), caPEM, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", n.CAFile(), err)
		}
	}
	if err := fsutil.WriteFileAtomic(n.PairFile(), pair, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", n.PairFile(), err)
	}
	return nil
}
