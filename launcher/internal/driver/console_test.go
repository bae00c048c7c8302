package driver

import (
	"context"
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// TestStatusCarriesSerialPty: a running domain's status names the serial
// pty libvirt put in its live XML; a stopped one's does not.
func TestStatusCarriesSerialPty(t *testing.T) {
	h := newHarness(t)
	h.mustSync(vmi(apiv1.PhaseScheduled))
	// libvirt fills the pty path into the live XML once QEMU opened it.
	h.conn.mu.Lock()
	s := h.conn.doms[testDomain]
	s.xml = strings.Replace(s.xml, "<serial type=\"pty\">", "<serial type=\"pty\"><source path=\"/dev/pts/7\"></source>", 1)
	h.conn.mu.Unlock()
	if !strings.Contains(s.xml, "/dev/pts/7") {
		t.Fatalf("test setup: no pty serial in the domain XML:\n%s", s.xml)
	}
	st, err := h.d.GetDomain(context.Background(), &launcherpb.Empty{})
	if err != nil || st.GetConsolePty() != "/dev/pts/7" {
		t.Fatalf("GetDomain = %v, %v; want console_pty /dev/pts/7", st, err)
	}
	if _, err := h.d.Kill(context.Background(), &launcherpb.Empty{}); err != nil {
		t.Fatal(err)
	}
	st, err = h.d.GetDomain(context.Background(), &launcherpb.Empty{})
	if err != nil || st.GetConsolePty() != "" {
		t.Fatalf("GetDomain of a stopped domain = %v, %v; want no console_pty", st, err)
	}
}
