package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"sync"
)

// KeyPair is a certificate that can be replaced while connections use it:
// TLS configs take it through GetCertificate (servers) or
// GetClientCertificate (nodes), so a renewed certificate is presented on
// the next handshake without a restart.
type KeyPair struct {
	certFile, keyFile string
	chainFiles        []string

	mu   sync.RWMutex
	cert *tls.Certificate
	raw  []byte // what cert was parsed from, to skip unchanged reloads
}

// LoadKeyPair reads certFile and keyFile (they may be the same file);
// chainFiles are PEM certificates sent after the leaf (the server sends
// its CA so that a joining node can check it against its pin).
func LoadKeyPair(certFile, keyFile string, chainFiles ...string) (*KeyPair, error) {
	k := &KeyPair{certFile: certFile, keyFile: keyFile, chainFiles: chainFiles}
	if _, err := k.Reload(); err != nil {
		return nil, err
	}
	return k, nil
}

// Reload reads the files again and reports whether the certificate
// changed. On error the current certificate stays in use.
func (k *KeyPair) Reload() (bool, error) {
	certPEM, err := os.ReadFile(k.certFile)
	if err != nil {
		return false, fmt.Errorf("reading certificate: %w", err)
	}
	keyPEM := certPEM
	if k.keyFile != k.certFile {
		if keyPEM, err = os.ReadFile(k.keyFile); err != nil {
			return false, fmt.Errorf("reading key: %w", err)
		}
	}
	raw := append(append([]byte{}, certPEM...), keyPEM...)
	var chainPEM []byte
	for _, f := range k.chainFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			return false, fmt.Errorf("reading certificate chain: %w", err)
		}
		chainPEM = append(chainPEM, b...)
	}
	raw = append(raw, chainPEM...)
	k.mu.RLock()
	same := k.raw != nil && bytes.Equal(raw, k.raw)
	k.mu.RUnlock()
	if same {
		return false, nil
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("loading %s: %w", k.certFile, err)
	}
	for b := chainPEM; ; {
		var blk *pem.Block
		if blk, b = pem.Decode(b); blk == nil {
			break
		}
		if blk.Type == "CERTIFICATE" {
			pair.Certificate = append(pair.Certificate, blk.Bytes)
		}
	}
	k.mu.Lock()
	k.cert, k.raw = &pair, raw
	k.mu.Unlock()
	return true, nil
}

// Certificate is the current certificate.
func (k *KeyPair) Certificate() *tls.Certificate {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return k.cert
}

// Leaf is the current certificate's leaf.
func (k *KeyPair) Leaf() *x509.Certificate { return k.Certificate().Leaf }

// GetCertificate is for tls.Config.GetCertificate.
func (k *KeyPair) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return k.Certificate(), nil
}

// GetClientCertificate is for tls.Config.GetClientCertificate.
func (k *KeyPair) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return k.Certificate(), nil
}
