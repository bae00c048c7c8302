// Package pki creates and loads the agent's TLS material and API token: a
// private CA, a server certificate signed by it, and a random bearer token.
// All of it lives in the agent's data dir so that several server hosts can
// share it by copying the directory (docs/operations.md).
package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
)

const (
	caValidity     = 10 * 365 * 24 * time.Hour
	serverValidity = 2 * 365 * 24 * time.Hour
	// A server certificate this close to expiry is renewed at start.
	renewBefore = 30 * 24 * time.Hour
)

// Paths of the files in a PKI directory.
type Paths struct {
	CACert, CAKey, ServerCert, ServerKey, Token string
}

// PathsIn returns the conventional file names below dir.
func PathsIn(dir string) Paths {
	return Paths{
		CACert:     filepath.Join(dir, "ca.crt"),
		CAKey:      filepath.Join(dir, "ca.key"),
		ServerCert: filepath.Join(dir, "server.crt"),
		ServerKey:  filepath.Join(dir, "server.key"),
		Token:      filepath.Join(dir, "token"),
	}
}

// Ensure creates whatever is missing in p: the CA, a server certificate
// valid for hosts (DNS names or IPs), and the token. An existing server
// certificate is reissued when it lacks one of hosts, was not signed by the
// CA, or is close to expiry.
func Ensure(p Paths, hosts []string, now time.Time) error {
	for _, f := range []string{p.CACert, p.ServerCert, p.Token} {
		if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
			return fmt.Errorf("creating pki directory: %w", err)
		}
	}
	caCert, caKey, err := ensureCA(p.CACert, p.CAKey, "virtplane CA", now)
	if err != nil {
		return err
	}
	if err := ensureLeaf(p.ServerCert, p.ServerKey, serverTemplate("virtplane-agent", hosts), caCert, caKey, hosts, now); err != nil {
		return err
	}
	if _, err := os.Stat(p.Token); errors.Is(err, os.ErrNotExist) {
		b := make([]byte, 32)
		if _, err := rand.Read(b); err != nil {
			return fmt.Errorf("generating token: %w", err)
		}
		if err := fsutil.WriteFileAtomic(p.Token, []byte(hex.EncodeToString(b)+"\n"), 0o600); err != nil {
			return fmt.Errorf("writing token: %w", err)
		}
	} else if err != nil {
		return fmt.Errorf("checking token file: %w", err)
	}
	return nil
}

// ReadToken reads a token file, trimming white space.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return tok, nil
}

// ServerTLSConfig is a TLS listener's config: it presents kp's current
// certificate (renewed without a restart) and verifies a client
// certificate when one is sent, against clientCAs (nodes; admins send a
// token instead, so a certificate is optional at this layer).
func ServerTLSConfig(kp *KeyPair, clientCAs *x509.CertPool) *tls.Config {
	return &tls.Config{
		GetCertificate: kp.GetCertificate,
		ClientAuth:     tls.VerifyClientCertIfGiven,
		ClientCAs:      clientCAs,
		MinVersion:     tls.VersionTLS12,
	}
}

// ensureCA loads the CA at certFile/keyFile, creating it (named
// commonName) when neither exists.
func ensureCA(certFile, keyFile, commonName string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cert, key, err := loadPair(certFile, keyFile)
	if err == nil {
		return cert, key, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("loading %s: %w", commonName, err)
	}
	key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating %s key: %w", commonName, err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"virtplane"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating %s certificate: %w", commonName, err)
	}
	if err := writePair(certFile, keyFile, der, key); err != nil {
		return nil, nil, err
	}
	cert, err = x509.ParseCertificate(der)
	return cert, key, err
}

// serverTemplate is a server certificate for hosts (DNS names or IPs).
func serverTemplate(commonName string, hosts []string) *x509.Certificate {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: commonName, Organization: []string{"virtplane"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return tmpl
}

// ensureLeaf keeps the pair at certFile/keyFile when certCovers says it
// still serves hosts, else issues tmpl (subject, usages, SANs) anew with a
// fresh key.
func ensureLeaf(certFile, keyFile string, tmpl *x509.Certificate, caCert *x509.Certificate, caKey *ecdsa.PrivateKey, hosts []string, now time.Time) error {
	if cert, _, err := loadPair(certFile, keyFile); err == nil {
		if certCovers(cert, caCert, hosts, now) {
			return nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("loading %s: %w", certFile, err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generating key for %s: %w", certFile, err)
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(serverValidity)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("creating %s: %w", certFile, err)
	}
	return writePair(certFile, keyFile, der, key)
}

// RenewalDue reports whether a server certificate is close enough to
// expiry to be reissued (Ensure does it).
func RenewalDue(cert *x509.Certificate, now time.Time) bool {
	return now.Add(renewBefore).After(cert.NotAfter)
}

// certCovers reports whether cert is signed by ca, valid long enough, and
// names every host.
func certCovers(cert, ca *x509.Certificate, hosts []string, now time.Time) bool {
	if cert.CheckSignatureFrom(ca) != nil || RenewalDue(cert, now) {
		return false
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(cert.IPAddresses, ip.Equal) {
				return false
			}
		} else if h != "" && !slices.Contains(cert.DNSNames, h) {
			return false
		}
	}
	return true
}

func loadPair(certFile, keyFile string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, fmt.Errorf("%s or %s is not PEM", certFile, keyFile)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing %s: %w", certFile, err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("parsing %s: %w", keyFile, err)
	}
	return cert, key, nil
}

func writePair(certFile, keyFile string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return fmt.Errorf("encoding key: %w", err)
	}
	// Key first: a certificate without its key would be unusable.
	if err := fsutil.WriteFileAtomic(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", keyFile, err)
	}
	if err := fsutil.WriteFileAtomic(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", certFile, err)
	}
	return nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return n
}
