package pki

import (
	"testing"
	"time"
)

// FuzzSignNodeCSR: whatever a caller sends as its certificate request,
// the CA never panics, and it signs only a request that names the node
// it asked for, with the node usage and nothing else from the request.
func FuzzSignNodeCSR(f *testing.F) {
	ca, _ := fuzzCA(f)
	nk, err := NewNodeKey("node-a")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(nk.CSRPEM, "node-a")
	f.Add(nk.CSRPEM, "node-b")
	f.Add([]byte("-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n"), "x")
	f.Fuzz(func(t *testing.T, csr []byte, node string) {
		cert, _, err := ca.SignNodeCSR(csr, node, time.Now(), time.Hour)
		if err != nil {
			return
		}
		name, ok := NodeName(cert)
		if !ok || name != node {
			t.Fatalf("signed a certificate for %q (node cert %v) when asked for %q", name, ok, node)
		}
		if len(cert.DNSNames)+len(cert.IPAddresses)+len(cert.URIs)+len(cert.EmailAddresses) != 0 || cert.IsCA {
			t.Fatalf("the request's extensions reached the certificate: %+v", cert)
		}
	})
}

func fuzzCA(f *testing.F) (*CA, Paths) {
	p := PathsIn(f.TempDir())
	if err := Ensure(p, []string{"localhost"}, time.Now()); err != nil {
		f.Fatal(err)
	}
	ca, err := LoadCA(p)
	if err != nil {
		f.Fatal(err)
	}
	return ca, p
}
