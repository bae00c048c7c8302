package client

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// writeClientPair writes a client certificate for cn and its key to dir.
func writeClientPair(t *testing.T, dir, cn string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

// A client certificate is presented over TLS, and then it is the
// credential: the token of the same configuration is not sent.
func TestDialClientCertificate(t *testing.T) {
	dir := t.TempDir()
	cert, caFile := selfSigned(t, dir)
	certFile, keyFile := writeClientPair(t, dir, "user alice")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var seen atomic.Value
	serve(t, lis, grpc.Creds(credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAnyClientCert,
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			c, err := x509.ParseCertificate(raw[0])
			if err == nil {
				seen.Store(c.Subject.CommonName)
			}
			return err
		},
	})))
	c := dial(t, Config{Endpoint: lis.Addr().String(), CAFile: caFile, Token: "tok", ClientCertFile: certFile, ClientKeyFile: keyFile})
	node, err := getNode(t, c)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got := node.GetMetadata().GetLabels()["authorization"]; got != "" {
		t.Errorf("a token was sent beside the client certificate: %q", got)
	}
	if got, _ := seen.Load().(string); got != "user alice" {
		t.Errorf("the server saw client certificate %q, want %q", got, "user alice")
	}
}

func TestDialClientCertificateErrors(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeClientPair(t, dir, "user alice")
	for name, cfg := range map[string]Config{
		"cert without key": {Endpoint: "h:1", ClientCertFile: certFile},
		"key without cert": {Endpoint: "h:1", ClientKeyFile: keyFile},
		"missing key file": {Endpoint: "h:1", ClientCertFile: certFile, ClientKeyFile: filepath.Join(dir, "missing.key")},
	} {
		t.Run(name, func(t *testing.T) {
			c, err := Dial(t.Context(), cfg)
			if err == nil {
				_ = c.Close()
				t.Fatal("Dial succeeded, want an error")
			}
			if !strings.Contains(err.Error(), "client certificate") {
				t.Errorf("error %q does not say it is about the client certificate", err)
			}
		})
	}
}
