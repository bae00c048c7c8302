package multinode

import (
	"strings"
	"testing"
)

func TestLibvirtdConf(t *testing.T) {
	got, err := libvirtdConf("0b7d9a7e-8f8e-4a51-9a3c-1f2e3d4c5b6a", "169.254.7.2", 16510)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`host_uuid = "0b7d9a7e-8f8e-4a51-9a3c-1f2e3d4c5b6a"` + "\n",
		`listen_addr = "169.254.7.2"` + "\n",
		`tcp_port = "16510"` + "\n",
		"listen_tcp = 1\n",
		"listen_tls = 0\n",
		`auth_tcp = "none"` + "\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("libvirtd.conf lacks %q:\n%s", want, got)
		}
	}
}

func TestQEMUConf(t *testing.T) {
	got, err := qemuConf("169.254.7.1", 49152, 49215)
	if err != nil {
		t.Fatal(err)
	}
	want := `# multinode test node: written by internal/testutil/multinode
migration_address = "169.254.7.1"
migration_host = "169.254.7.1"
migration_port_min = 49152
migration_port_max = 49215
cgroup_controllers = [ ]
`
	if got != want {
		t.Errorf("qemu.conf:\n%s\nwant:\n%s", got, want)
	}
	lst, err := renderConf("h", []confValue{list("k", "a", "b")})
	if err != nil || !strings.Contains(lst, `k = [ "a", "b" ]`) {
		t.Errorf("list rendered as %q (%v)", lst, err)
	}
}

func TestConfRefusesUnquotableValues(t *testing.T) {
	for _, v := range []string{`a"b`, "a\nlog_outputs = \"1:stderr\"", "a\x00"} {
		_, err := libvirtdConf("u", v, 1)
		if err == nil || !strings.Contains(err.Error(), "listen_addr") {
			t.Errorf("listen_addr %q: error %v, want one naming listen_addr", v, err)
		}
	}
}
