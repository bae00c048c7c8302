package nodeagent

import (
	"context"
	"strings"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/launcher"
)

func TestQEMUDriverLocal(t *testing.T) {
	for _, tc := range []struct {
		uri     string
		want    bool
		wantErr bool
	}{
		{"qemu:///system", true, false},
		{"qemu+unix:///system", true, false},
		{"qemu://localhost/system", true, false},
		{"qemu:///session", true, false}, // QEMU as the agent's user: New refuses root
		{"test:///default", false, false},
		{"qemu+ssh://other/system", false, true},
		{"qemu://other/system", false, true},
		{"qemu+tcp:///system", false, true},
		{"%zz", false, true},
	} {
		got, err := qemuDriverLocal(tc.uri)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("qemuDriverLocal(%q) = %v, %v; want %v, error %v", tc.uri, got, err, tc.want, tc.wantErr)
		}
	}
}

// noQEMUTools are launcher tools of a host without QEMU.
type noQEMUTools struct{}

func (noQEMUTools) Probe(context.Context, string) (launcher.ProbeResult, error) {
	return launcher.ProbeResult{}, nil
}

func (noQEMUTools) ListDomains(context.Context, string) ([]launcher.DomainInfo, error) {
	return nil, nil
}

func (noQEMUTools) ListNetworks(context.Context, string) ([]launcher.NetworkInfo, error) {
	return nil, nil
}

// TestGuestFirewallOnlyForQEMU: tools other than the real launcher's, or
// libvirt's test driver, run no QEMU, so nothing is installed (the
// firewall itself is internal/guestnet's tests, the agent installing it
// the guest test in internal/e2e); a remote QEMU driver is refused.
func TestGuestFirewallOnlyForQEMU(t *testing.T) {
	for _, tc := range []struct {
		tools   LauncherTools
		uri     string
		wantErr string
	}{
		{noQEMUTools{}, "qemu:///system", ""},
		{ExecTools{Path: "/nonexistent"}, "test:///default", ""},
		{ExecTools{Path: "/nonexistent"}, "qemu+ssh://other/system", "another host"},
	} {
		a := &Agent{opts: Options{Tools: tc.tools, LibvirtURI: tc.uri}}
		uids, gids, err := a.qemuUsers(context.Background())
		if err == nil && (len(uids) != 0 || len(gids) != 0) {
			t.Errorf("%T on %s: QEMU users %v, groups %v, want none", tc.tools, tc.uri, uids, gids)
		}
		var stop func()
		if err == nil {
			stop, err = a.startGuestFirewall(context.Background(), uids)
		}
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%T on %s: %v, want error %q", tc.tools, tc.uri, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%T on %s: %v", tc.tools, tc.uri, err)
			continue
		}
		stop()
	}
}
