package pki

import (
	"crypto/ecdsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
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
	// PeerCert and PeerKey are this member's side of the peer links of an
	// embedded cluster, as server and as client (EnsureEtcdPeer).
	PeerCert, PeerKey string
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
		PeerCert:   filepath.Join(dir, "peer.crt"),
		PeerKey:    filepath.Join(dir, "peer.key"),
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
	caCert, caKey, err := ensureEtcdCA(p, now)
	if err != nil {
		return err
	}
	if err := ensureLeaf(p.ServerCert, p.ServerKey, serverTemplate("virtplane-etcd", hosts), caCert, caKey, hosts, now); err != nil {
		return err
	}
	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: EtcdClientName, Organization: []string{"virtplane"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return ensureLeaf(p.ClientCert, p.ClientKey, client, caCert, caKey, nil, now)
}

// EtcdPeerName is the common name of every member's peer certificate.
// Members let in only peers of that name: the operator's client
// certificate comes from the same CA but must not join raft.
const EtcdPeerName = "virtplane-etcd-peer"

// EnsureEtcdPeer creates the etcd CA when missing and the member's peer
// certificate, valid for hosts (its peer URLs' hosts) as server and as
// client, reissuing one that lacks a host, is close to expiry or was not
// signed by the CA (e.g. copied along with the CA from another server).
func EnsureEtcdPeer(p EtcdPaths, hosts []string, now time.Time) error {
	caCert, caKey, err := ensureEtcdCA(p, now)
	if err != nil {
		return err
	}
	tmpl := serverTemplate(EtcdPeerName, hosts)
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	return ensureLeaf(p.PeerCert, p.PeerKey, tmpl, caCert, caKey, hosts, now)
}

// ensureEtcdCA makes p.Dir (0700) and the etcd CA in it when missing.
func ensureEtcdCA(p EtcdPaths, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("creating etcd pki directory: %w", err)
	}
	if err := os.Chmod(p.Dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("etcd pki directory: %w", err)
	}
	return ensureCA(p.CACert, p.CAKey, "virtplane etcd CA", now)
}
