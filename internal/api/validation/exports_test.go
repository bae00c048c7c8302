package validation

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
)

func selfSigned(t *testing.T, mutate func(*x509.Certificate)) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "n1"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.ParseIP("192.0.2.1")},
		BasicConstraintsValid: true}
	mutate(tmpl)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestCheckExportCertificate(t *testing.T) {
	addr := netip.MustParseAddr("192.0.2.1")
	made, err := pki.EnsureExportCertificate(t.TempDir(), "n1", addr, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckExportCertificate(string(made.PEM), addr); err != nil {
		t.Fatalf("the node's own certificate: %v", err)
	}
	for name, c := range map[string]struct {
		pem  string
		want string
	}{
		"other IP":              {string(made.PEM), "exactly"},
		"a CA":                  {selfSigned(t, func(c *x509.Certificate) { c.IsCA = true; c.KeyUsage |= x509.KeyUsageCertSign }), "CA"},
		"client usage":          {selfSigned(t, func(c *x509.Certificate) { c.ExtKeyUsage = append(c.ExtKeyUsage, x509.ExtKeyUsageClientAuth) }), "alone"},
		"a DNS name":            {selfSigned(t, func(c *x509.Certificate) { c.DNSNames = []string{"api.example"} }), "DNS"},
		"two certs":             {string(made.PEM) + string(made.PEM), "one PEM"},
		"not PEM":               {"hello", "one PEM"},
		"private key":           {"-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n", "one PEM"},
		"too long":              {strings.Repeat("A", 5000), "longer"},
		"signed by another key": {signedByOther(t), "self-signed"},
		"a second IP":           {selfSigned(t, func(c *x509.Certificate) { c.IPAddresses = append(c.IPAddresses, net.ParseIP("192.0.2.9")) }), "exactly"},
	} {
		at := addr
		if name == "other IP" {
			at = netip.MustParseAddr("192.0.2.2")
		}
		err := CheckExportCertificate(c.pem, at)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
}

func TestValidateNodeExportEndpoint(t *testing.T) {
	cert := selfSigned(t, func(*x509.Certificate) {})
	node := func(addr, cert string) *apiv1.Node {
		return &apiv1.Node{Metadata: &apiv1.ObjectMeta{Name: "n1"}, Status: &apiv1.NodeStatus{ExportAddress: addr, ExportCertificate: cert}}
	}
	if errs := validateExportEndpoint(node("192.0.2.1:8444", cert).GetStatus(), nil); len(errs) > 0 {
		t.Fatalf("good endpoint: %v", errs)
	}
	for _, c := range []struct{ addr, cert, field string }{
		{"192.0.2.1", cert, "export_address"},
		{"0.0.0.0:8444", cert, "export_address"},
		{"192.0.2.1:0", cert, "export_address"},
		{"host.example:8444", cert, "export_address"},
		{"192.0.2.1:8444", "", "export_certificate"},
		{"", cert, "export_certificate"},
		{"192.0.2.3:8444", cert, "export_certificate"},
	} {
		errs := ValidateNode(node(c.addr, c.cert))
		if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "status."+c.field) {
			t.Errorf("%q (certificate %v): %v, want an error on status.%s", c.addr, c.cert != "", errs, c.field)
		}
	}
}

// signedByOther is a certificate for 192.0.2.1 whose signature is not
// its own key's.
func signedByOther(t *testing.T) string {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "n1"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IPAddresses: []net.IP{net.ParseIP("192.0.2.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, other)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
