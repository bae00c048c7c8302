package pki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"
)

// EtcdDirName is the embedded etcd's PKI directory inside the agent's PKI
// directory: <data-dir>/pki/etcd.
const EtcdDirName = "etcd"

// EtcdPaths are the files of the embedded etcd's own PKI, which guards its
// extra client listeners (--etcd-listen-client). Its CA is not the agent
// CA on purpose: the agent CA signs every node's client certificate, and a
// node must never open etcd, where it could read every object and write
// ones the API would refuse. Whoever holds the operator client key has
// full access to the store.
type EtcdPaths struct {
	Dir                   string
	CACert, CAKey         string
	ServerCert, ServerKey string // the listeners' certificate
	ClientCert, ClientKey string // for operators: etcdctl --cacert/--cert/--key
}

// EtcdPathsIn returns the files below pkiDir/EtcdDirName.
func EtcdPathsIn(pkiDir string) EtcdPaths {
	dir := filepath.Join(pkiDir, EtcdDirName)
	return EtcdPaths{
		Dir:        dir,
		CACert:     filepath.Join(dir, "ca.crt"),
		CAKey:      filepath.Join(dir, "ca.key"),
		ServerCert: filepath.Join(dir, "server.crt"),
		ServerKey:  filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.crt"),
		ClientKey:  filepath.Join(dir, "client.key"),
	}
}

// EtcdClientName is the common name of the operator client certificate.
const EtcdClientName = "virtplane-etcd-operator"

// EnsureEtcd creates whatever is missing in p: the etcd CA, a server
// certificate valid for hosts (the listeners' IPs or names), and the
// operator client certificate; keys are 0600 in a 0700 directory. A
// certificate not signed by the CA, close to expiry, or (the server's)
// lacking one of hosts is reissued.
func EnsureEtcd(p EtcdPaths, hosts []string, now time.Time) error {
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return fmt.Errorf("creating etcd pki directory: %w", err)
	}
	if err := os.Chmod(p.Dir, 0o700); err != nil {
		return fmt.Errorf("etcd pki directory: %w", err)
	}
	caCert, caKey, err := ensureEtcdCA(p, now)
	if err != nil {
		return err
	}
	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "virtplane-etcd", Organization: []string{"virtplane"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			server.IPAddresses = append(server.IPAddresses, ip)
		} else if h != "" {
			server.DNSNames = append(server.DNSNames, h)
		}
	}
	if err := ensureLeaf(p.ServerCert, p.ServerKey, server, caCert, caKey, hosts, now); err != nil {
		return err
	}
	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: EtcdClientName, Organization: []string{"virtplane"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return ensureLeaf(p.ClientCert, p.ClientKey, client, caCert, caKey, nil, now)
}

func ensureEtcdCA(p EtcdPaths, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cert, key, err := loadPair(p.CACert, p.CAKey)
	if err == nil {
		return cert, key, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("loading etcd CA: %w", err)
	}
	key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating etcd CA key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "virtplane etcd CA", Organization: []string{"virtplane"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating etcd CA certificate: %w", err)
	}
	if err := writePair(p.CACert, p.CAKey, der, key); err != nil {
		return nil, nil, err
	}
	cert, err = x509.ParseCertificate(der)
	return cert, key, err
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
