package migrationdest

import (
	"net/netip"
	"net/url"
	"strings"
	"testing"
)

func TestBuild(t *testing.T) {
	for _, tc := range []struct {
		p       Policy
		addr    string
		wantURI string
	}{
		{Policy{}, "10.0.0.2", "qemu+tls://10.0.0.2:16514/system"},
		{Policy{Transport: TransportTLS, Port: 1514}, "10.0.0.2", "qemu+tls://10.0.0.2:1514/system"},
		{Policy{Transport: TransportTCP}, "169.254.7.2", "qemu+tcp://169.254.7.2:16509/system"},
		{Policy{}, "2001:db8::2", "qemu+tls://[2001:db8::2]:16514/system"},
		{Policy{Networks: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}, "10.1.2.3", "qemu+tls://10.1.2.3:16514/system"},
	} {
		d, err := tc.p.Build(tc.addr)
		if err != nil || d.LibvirtURI != tc.wantURI || d.Address != tc.addr {
			t.Errorf("%+v.Build(%s) = %+v, %v; want %s", tc.p, tc.addr, d, err, tc.wantURI)
			continue
		}
		// What the server builds, every reader accepts.
		if err := Validate(d.LibvirtURI, d.Address); err != nil {
			t.Errorf("Validate(Build(%s)) = %v", tc.addr, err)
		}
	}
}

func TestBuildRefusesAddresses(t *testing.T) {
	nets := Policy{Networks: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}}
	for _, tc := range []struct {
		p    Policy
		addr string
		want string
	}{
		{Policy{}, "", "not an IP address"},
		{Policy{}, "node-b.example", "not an IP address"},
		{Policy{}, "127.0.0.1", "loopback"},
		{Policy{}, "::1", "loopback"},
		{Policy{}, "0.0.0.0", "unspecified"},
		{Policy{}, "::", "unspecified"},
		{Policy{}, "224.0.0.1", "multicast"},
		{Policy{}, "ff02::1", "multicast"},
		{Policy{}, "255.255.255.255", "not a unicast address"},
		{Policy{}, "fe80::1%eth0", "zone"},
		{Policy{}, "::ffff:10.0.0.2", "write it as 10.0.0.2"},
		{Policy{}, "2001:DB8::2", "written as 2001:db8::2"},
		{Policy{}, "10.0.0.2:16514", "not an IP address"},
		{nets, "192.168.1.2", "--migration-networks 10.0.0.0/8,fd00::/8"},
		{nets, "2001:db8::2", "not in the networks"},
	} {
		d, err := tc.p.Build(tc.addr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Build(%q) = %+v, %v; want an error saying %q", tc.addr, d, err, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	const addr = "10.0.0.2"
	for _, tc := range []struct {
		uri, addr string
		want      string // "" valid, else part of the error
	}{
		{"qemu+tls://10.0.0.2:16514/system", addr, ""},
		{"qemu+tcp://10.0.0.2:16509/system", addr, ""},
		{"qemu+tls://[2001:db8::2]:16514/system", "2001:db8::2", ""},
		// The attack: libvirt's ext transport runs command as root.
		{"qemu+ext:///system?command=/tmp/x", addr, `scheme "qemu+ext"`},
		{"qemu+tls://10.0.0.2:16514/system?command=/tmp/x", addr, "query"},
		{"qemu+tls://10.0.0.2:16514/system?", addr, "query"},
		{"qemu+ssh://root@10.0.0.2/system", addr, `scheme "qemu+ssh"`},
		{"qemu+unix:///system?socket=/tmp/s", addr, `scheme "qemu+unix"`},
		{"qemu:///system", addr, `scheme "qemu"`},
		{"QEMU+TLS://10.0.0.2:16514/system", addr, "written as qemu+tls://10.0.0.2:16514/system"},
		{"qemu+tls://u@10.0.0.2:16514/system", addr, "user"},
		{"qemu+tls://10.0.0.2:16514/system#x", addr, "fragment"},
		{"qemu+tls://10.0.0.2:16514/session", addr, `path "/session"`},
		{"qemu+tls://10.0.0.2:16514/system/", addr, "path"},
		{"qemu+tls://10.0.0.2:16514", addr, "path"},
		{"qemu+tls:10.0.0.2", addr, "scheme://host:port/system"},
		{"qemu+tls://10.0.0.2/system", addr, "host and port"},
		{"qemu+tls://10.0.0.2:ssh/system", addr, "not a URI"},
		{"qemu+tls://10.0.0.2:0/system", addr, "not a port"},
		{"qemu+tls://10.0.0.2:016514/system", addr, "not a port"},
		{"qemu+tls://10.0.0.2:65536/system", addr, "not a port"},
		// The host is the target's address, not another.
		{"qemu+tls://10.0.0.3:16514/system", addr, "must be the target's migration address 10.0.0.2"},
		{"qemu+tls://node-b:16514/system", addr, "must be the target's migration address"},
		{"qemu+tls://[::ffff:10.0.0.2]:16514/system", addr, "must be the target's migration address"},
		{"qemu+tls://10.0.0.2:16514/%73ystem", addr, "written as"},
		// The address is a migration address.
		{"qemu+tls://127.0.0.1:16514/system", "127.0.0.1", "loopback"},
		{"qemu+tls://10.0.0.2:16514/system", "", "not an IP address"},
		{"qemu+tls://10.0.0.2:16514/system", "192.0.2.254", "must be the target's migration address 192.0.2.254"},
		{"qemu+tls://\x00:1/system", addr, "not a URI"},
	} {
		err := Validate(tc.uri, tc.addr)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Validate(%q, %q) = %v, want nil", tc.uri, tc.addr, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Validate(%q, %q) = %v, want an error saying %q", tc.uri, tc.addr, err, tc.want)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	for _, tc := range []struct {
		p    Policy
		want string
	}{
		{Policy{}, ""},
		{Policy{Transport: TransportTCP, Port: 16509, Networks: []netip.Prefix{netip.MustParsePrefix("169.254.0.0/16")}}, ""},
		{Policy{Transport: "ext"}, "--migration-transport"},
		{Policy{Transport: "ssh"}, "--migration-transport"},
		{Policy{Port: 70000}, "--migration-libvirt-port"},
		{Policy{Port: -1}, "--migration-libvirt-port"},
		{Policy{Networks: []netip.Prefix{netip.MustParsePrefix("10.1.2.3/8")}}, "want 10.0.0.0/8"},
	} {
		err := tc.p.Validate()
		if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%+v.Validate() = %v, want %q", tc.p, err, tc.want)
		}
	}
}

// FuzzValidate: whatever Validate accepts is a libvirtd on the target's
// unicast address over TLS or TCP, with nothing libvirt could read as a
// transport option, and exactly what the server would build; it never
// panics.
func FuzzValidate(f *testing.F) {
	for _, s := range [][2]string{
		{"qemu+tls://10.0.0.2:16514/system", "10.0.0.2"},
		{"qemu+tcp://[2001:db8::2]:16509/system", "2001:db8::2"},
		{"qemu+ext:///system?command=/tmp/x", "10.0.0.2"},
		{"qemu+tls://10.0.0.2:16514/system?command=/tmp/x", "10.0.0.2"},
		{"qemu+ssh://root@10.0.0.2:22/system?keyfile=/root/.ssh/id", "10.0.0.2"},
		{"qemu+tls://10.0.0.2:16514/system#f", "10.0.0.2"},
		{"qemu+tls://127.0.0.1:16514/system", "127.0.0.1"},
		{"qemu+tls://[fe80::1%25eth0]:16514/system", "fe80::1%eth0"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, raw, addr string) {
		if Validate(raw, addr) != nil {
			return
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("accepted %q, which does not parse: %v", raw, err)
		}
		if (u.Scheme != "qemu+tls" && u.Scheme != "qemu+tcp") || u.User != nil || u.RawQuery != "" || u.ForceQuery ||
			u.Fragment != "" || u.Opaque != "" || u.Path != "/system" {
			t.Fatalf("accepted %q: %#v", raw, u)
		}
		a, err := ParseAddress(addr)
		if err != nil || u.Hostname() != a.String() || a.IsLoopback() || a.IsUnspecified() || a.IsMulticast() {
			t.Fatalf("accepted %q for address %q (%v)", raw, addr, err)
		}
		port := 0
		for _, c := range u.Port() {
			port = port*10 + int(c-'0')
		}
		transport := strings.TrimPrefix(u.Scheme, "qemu+")
		d, err := Policy{Transport: transport, Port: port}.Build(addr)
		if err != nil || d.LibvirtURI != raw || d.Address != addr {
			t.Fatalf("accepted %q for %q, but the server builds %+v, %v", raw, addr, d, err)
		}
	})
}
