package pki

import (
	"testing"
	"time"
)

// A user certificate names the subject the server chose, whatever the
// request asks; it never reads as a node's, nor a node's as a user's.
func TestSignUserCSR(t *testing.T) {
	ca, _ := testCA(t)
	// The request claims to be a node: the server's subject wins.
	nk, err := NewNodeKey("node-a")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	cert, _, err := ca.SignUserCSR(nk.CSRPEM, UserCommonName(UserCertServiceAccount, "ci", "deployer"), now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kind, ns, name, ok := UserSubject(cert)
	if !ok || kind != UserCertServiceAccount || ns != "ci" || name != "deployer" {
		t.Fatalf("UserSubject = %q %q %q %v", kind, ns, name, ok)
	}
	if n, ok := NodeName(cert); ok {
		t.Fatalf("a user certificate reads as node %q", n)
	}
	if cert.NotAfter.Sub(now) > time.Hour+time.Second {
		t.Fatalf("validity %v", cert.NotAfter.Sub(now))
	}
	nodeCert, _, err := ca.SignNodeCSR(nk.CSRPEM, "node-a", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := UserSubject(nodeCert); ok {
		t.Fatal("a node certificate reads as a user's")
	}
	u, _, err := ca.SignUserCSR(nk.CSRPEM, UserCommonName(UserCertUser, "", "alice"), now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if kind, ns, name, ok := UserSubject(u); !ok || kind != UserCertUser || ns != "" || name != "alice" {
		t.Fatalf("UserSubject = %q %q %q %v", kind, ns, name, ok)
	}
	if _, _, err := ca.SignUserCSR([]byte("junk"), "user:x", now, time.Hour); err == nil {
		t.Fatal("a junk request was signed")
	}
}
