package guestnet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// capsXML is libvirt's capabilities with the host's security models as
// libvirt 9.0 on Debian 12 prints them, the DAC labels replaced.
func capsXML(labels ...string) string {
	var b strings.Builder
	b.WriteString("<capabilities><host><uuid>00000000-0000-0000-0000-000000000000</uuid><cpu><arch>x86_64</arch></cpu>")
	b.WriteString("<secmodel><model>none</model><doi>0</doi></secmodel>")
	if labels != nil {
		b.WriteString("<secmodel><model>dac</model><doi>0</doi>")
		for _, l := range labels {
			typ, val, _ := strings.Cut(l, "=")
			fmt.Fprintf(&b, "<baselabel type='%s'>%s</baselabel>", typ, val)
		}
		b.WriteString("</secmodel>")
	}
	b.WriteString("</host></capabilities>")
	return b.String()
}

func TestQEMUUsersFromCapabilities(t *testing.T) {
	for _, tc := range []struct {
		caps    string
		want    []uint32
		wantErr string
	}{
		{capsXML("kvm=+64055:+64055", "qemu=+64055:+64055"), []uint32{64055}, ""},
		{capsXML("kvm=+107:+107", "qemu=+64055:+107"), []uint32{107, 64055}, ""},
		{capsXML("kvm=+0:+0", "qemu=+0:+0"), []uint32{0}, ""}, // refused by New, not here
		{capsXML("kvm=root:root"), []uint32{0}, ""},
		{capsXML("lxc=+1:+1"), nil, "no DAC base label"},
		{capsXML(), nil, "no DAC base label"},
		{capsXML("qemu=+64055"), nil, "not user:group"},
		{capsXML("qemu=+x:+1"), nil, `uid "x"`},
		{capsXML("qemu=no-such-user-here:x"), nil, "no-such-user-here"},
		{"<capabilities", nil, "libvirt capabilities"},
	} {
		got, _, err := qemuIDs(tc.caps)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("qemuIDs(%s) = %v, %v; want error %q", tc.caps, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("qemuIDs(%s) users = %v, %v; want %v", tc.caps, got, err, tc.want)
		}
	}
}

// TestQEMUGroupsFromCapabilities: the groups of the labels, which the
// image directory is shared with.
func TestQEMUGroupsFromCapabilities(t *testing.T) {
	for _, tc := range []struct {
		caps string
		want []uint32
	}{
		{capsXML("kvm=+64055:+64055", "qemu=+64055:+64055"), []uint32{64055}},
		{capsXML("kvm=+107:+107", "qemu=+64055:+107"), []uint32{107}},
		{capsXML("kvm=+107:+108", "qemu=+64055:+107"), []uint32{107, 108}},
		{capsXML("kvm=root:root"), []uint32{0}},
	} {
		_, got, err := qemuIDs(tc.caps)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("qemuIDs(%s) groups = %v, %v; want %v", tc.caps, got, err, tc.want)
		}
	}
	if _, _, err := qemuIDs(capsXML("qemu=+1:+x")); err == nil || !strings.Contains(err.Error(), `gid "x"`) {
		t.Errorf("a bad gid: %v", err)
	}
}

// TestQEMUUsersFromVirsh asks the host's libvirt, when the tests have
// one.
func TestQEMUUsersFromVirsh(t *testing.T) {
	uri := os.Getenv("VIRTPLANE_TEST_LIBVIRT_URI")
	if uri == "" {
		t.Skip("VIRTPLANE_TEST_LIBVIRT_URI is not set")
	}
	uids, _, err := QEMUIDs(context.Background(), "", uri)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("libvirt runs QEMU as %v", uids)
	if slices.Contains(uids, 0) {
		t.Errorf("QEMU runs as root here (%v): the guest firewall cannot work", uids)
	}
	if _, _, err := QEMUIDs(context.Background(), filepath.Join(t.TempDir(), "virsh"), uri); err == nil {
		t.Error("a missing virsh passed")
	}
}

// TestDaemonNetNS runs a process named libvirtd and finds it by a pid
// file, past a stale one of the modular daemon.
func TestDaemonNetNS(t *testing.T) {
	run := t.TempDir()
	if _, err := DaemonNetNS(run); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("no pid files: %v, want ErrNoDaemon", err)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip(err)
	}
	bin := filepath.Join(t.TempDir(), "libvirtd")
	b, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// virtqemud's names this test process: not a virtqemud, so stale.
	if err := os.WriteFile(filepath.Join(run, "virtqemud.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := DaemonNetNS(run); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("stale pid file: %v, want ErrNoDaemon", err)
	}
	if err := os.WriteFile(filepath.Join(run, "libvirtd.pid"), []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := DaemonNetNS(run)
	if want := fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid); err != nil || got != want {
		t.Fatalf("DaemonNetNS = %q, %v; want %q", got, err, want)
	}
}
