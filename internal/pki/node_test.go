package pki

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"strings"
	"testing"
	"time"
)

func testCA(t *testing.T) (*CA, Paths) {
	t.Helper()
	p := PathsIn(t.TempDir())
	if err := Ensure(p, []string{"localhost"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	ca, err := LoadCA(p)
	if err != nil {
		t.Fatal(err)
	}
	return ca, p
}

// The server decides a node certificate's subject, usage and validity;
// the request contributes its public key only.
func TestSignNodeCSR(t *testing.T) {
	ca, p := testCA(t)
	nk, err := NewNodeKey("node-a")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	cert, certPEM, err := ca.SignNodeCSR(nk.CSRPEM, "node-a", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if name, ok := NodeName(cert); !ok || name != "node-a" {
		t.Fatalf("NodeName = %q, %v", name, ok)
	}
	if cert.NotAfter.Sub(now) > time.Hour+time.Second || len(cert.DNSNames)+len(cert.IPAddresses) != 0 {
		t.Fatalf("validity %v, SANs %v %v", cert.NotAfter.Sub(now), cert.DNSNames, cert.IPAddresses)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("node certificate does not verify as a client: %v", err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Fatal("a node certificate verifies as a server's")
	}
	if !strings.Contains(string(certPEM), "BEGIN CERTIFICATE") {
		t.Fatal("no PEM")
	}
	// The server's own certificate is not a node's.
	srv, _, err := loadPair(p.ServerCert, p.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := NodeName(srv); ok {
		t.Fatal("the server certificate passes as a node certificate")
	}
	if at := RenewAt(cert); !at.After(cert.NotBefore) || !at.Before(cert.NotAfter) {
		t.Fatalf("RenewAt %v outside the validity", at)
	}
}

func TestSignNodeCSRRefuses(t *testing.T) {
	ca, _ := testCA(t)
	other, err := NewNodeKey("node-b")
	if err != nil {
		t.Fatal(err)
	}
	weak, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "node-a"}}, weak)
	if err != nil {
		t.Fatal(err)
	}
	tampered := append([]byte{}, der...)
	tampered[len(tampered)-1] ^= 0xff
	for name, tc := range map[string]struct {
		csr  []byte
		want string
	}{
		"another node's name": {other.CSRPEM, `"node-b" must be the node name "node-a"`},
		"weak RSA key":        {pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}), "at least 2048 bits"},
		"bad signature":       {pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: tampered}), "csr"},
		"not PEM":             {[]byte("hello"), "one PEM CERTIFICATE REQUEST"},
		"two blocks":          {append(append([]byte{}, other.CSRPEM...), other.CSRPEM...), "one PEM CERTIFICATE REQUEST"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, err := ca.SignNodeCSR(tc.csr, "node-a", time.Now(), time.Hour)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// A node's identity file holds certificate and key together, so a renewal
// replaces both in one rename.
func TestNodeIdentityRoundTrip(t *testing.T) {
	ca, _ := testCA(t)
	id := IdentityDir(t.TempDir())
	if id.Exists() {
		t.Fatal("exists before join")
	}
	nk, err := NewNodeKey("node-a")
	if err != nil {
		t.Fatal(err)
	}
	cert, certPEM, err := ca.SignNodeCSR(nk.CSRPEM, "node-a", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := id.Write(nk.Key, certPEM, ca.PEM); err != nil {
		t.Fatal(err)
	}
	kp, err := LoadKeyPair(id.PairFile(), id.PairFile())
	if err != nil {
		t.Fatal(err)
	}
	if SerialHex(kp.Leaf()) != SerialHex(cert) {
		t.Fatal("loaded another certificate")
	}
}
