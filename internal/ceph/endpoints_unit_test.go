package ceph

import (
	"context"
	"errors"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// fakeRunner answers by the CLI's last words: pure logic, the parsing of
// what Pacific's CLIs print (captured from the test cluster, trimmed).
type fakeRunner map[string]string

func (f fakeRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	cmd := strings.Join(args, " ")
	for suffix, out := range f {
		if strings.HasSuffix(cmd, suffix) {
			return []byte(out), nil
		}
	}
	return nil, errors.New("unexpected " + name + " " + cmd)
}

func TestEndpointsParsing(t *testing.T) {
	c := &Conn{Monitors: []string{"10.77.0.1:3300", "[fd00::9]:3300"}, Pool: "vp", User: "vp", KeyFile: "/k", Runner: fakeRunner{
		"mon dump --format json": `{"epoch":1,"mons":[{"rank":0,"name":"a","public_addrs":{"addrvec":[{"type":"v2","addr":"10.77.0.1:3300","nonce":0},{"type":"v1","addr":"10.77.0.1:6789","nonce":0}]},"addr":"10.77.0.1:6789/0"},` +
			`{"rank":1,"name":"b","public_addrs":{"addrvec":[{"type":"v2","addr":"[fd00::2]:3300","nonce":0}]}}]}`,
		"osd dump --format json": `{"epoch":12,"osds":[{"osd":0,"up":1,"public_addrs":{"addrvec":[{"type":"v2","addr":"10.77.0.1:6800","nonce":19341},{"type":"v1","addr":"10.77.0.1:6801","nonce":19341}]},` +
			`"cluster_addrs":{"addrvec":[{"type":"v2","addr":"10.77.0.1:6802","nonce":19341}]},"heartbeat_back_addrs":{"addrvec":[{"type":"v2","addr":"10.77.0.1:6806","nonce":19341}]}},` +
			`{"osd":1,"up":0,"public_addrs":{"addrvec":[]}},{"osd":2,"up":0,"public_addrs":{"addrvec":[{"type":"v2","addr":"0.0.0.0:0","nonce":0}]}}]}`,
	}}
	got, err := c.Endpoints(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var want []netip.AddrPort
	for _, s := range []string{"10.77.0.1:3300", "10.77.0.1:6789", "10.77.0.1:6800", "10.77.0.1:6801", "[fd00::2]:3300", "[fd00::9]:3300"} {
		want = append(want, netip.MustParseAddrPort(s))
	}
	if !slices.Equal(got, want) {
		t.Errorf("endpoints %v, want %v", got, want)
	}
}

func TestClassifyCephCLI(t *testing.T) {
	exit1 := exec.Command("false").Run() // exit status 1, as the ceph CLI's
	for _, tc := range []struct {
		stderr string
		want   error
	}{
		{"[errno 110] RADOS timed out (error connecting to the cluster)", ErrUnreachable},
		{"[errno 13] RADOS permission denied (error connecting to the cluster)", ErrDenied},
		{"[errno 2] RADOS object not found (error connecting to the cluster)", ErrNotFound},
		// A client without a key file: the keyring search's ENOENT is
		// not the cause.
		{"auth: unable to find a keyring on /etc/ceph/ceph.client.vp.keyring: (2) No such file or directory\n" +
			"monclient(hunting): handle_auth_bad_method server allowed_methods [] but i only support [1]\n" +
			"[errno 13] RADOS permission denied (error connecting to the cluster)", ErrDenied},
	} {
		err := classify(&CLIError{Name: "ceph", Stderr: tc.stderr, Err: exit1})
		if !errors.Is(err, tc.want) {
			t.Errorf("%q: %v, want %v", tc.stderr, err, tc.want)
		}
	}
}
