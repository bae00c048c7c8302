package testguest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
)

// TestCIUserParser runs init.sh's cloud-config parser (its
// --virtplane-ciuser mode) under busybox, whose sh and awk the guest runs.
func TestCIUserParser(t *testing.T) {
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox not installed (scripts/install-deps.sh test installs busybox-static)")
	}
	dir := t.TempDir()
	script := filepath.Join(dir, "init")
	if err := os.WriteFile(script, []byte(testguest.InitScript), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, userData string
		want           []string // output lines; nil: none
		exit           int
	}{
		{name: "one user one key",
			userData: "#cloud-config\nusers:\n  - name: alice\n    ssh_authorized_keys:\n      - ssh-ed25519 AAAA alice@example\n",
			want:     []string{"name alice", "key ssh-ed25519 AAAA alice@example"}},
		{name: "default entry skipped, second user ignored, quotes and comments",
			userData: "#cloud-config\r\nhostname: h\r\nusers:\r\n  - default\r\n  - name: 'alice'  # me\r\n    gecos: A\r\n" +
				"    ssh_authorized_keys:\r\n    - \"ssh-rsa AAAB # not a comment\"\r\n    - ssh-ed25519 CCCC c\r\n    sudo: ALL\r\n" +
				"  - name: bob\r\n    ssh_authorized_keys: [k]\r\nruncmd:\r\n  - echo\r\n",
			want: []string{"name alice", "key ssh-rsa AAAB # not a comment", "key ssh-ed25519 CCCC c"}},
		{name: "list at indent 0 and flow keys",
			userData: "#cloud-config\nusers:\n- ssh_authorized_keys: [ \"ssh-ed25519 A a\", ssh-ed25519 B b ]\n  name: carol\nwrite_files: []\n",
			want:     []string{"name carol", "key ssh-ed25519 A a", "key ssh-ed25519 B b"}},
		{name: "user without keys",
			userData: "#cloud-config\nusers:\n  - name: dave\n",
			want:     []string{"name dave"}},
		{name: "keys of a later top-level list are not the user's",
			userData: "#cloud-config\nusers:\n  - name: erin\nssh_authorized_keys:\n  - ssh-ed25519 X x\n",
			want:     []string{"name erin"}},
		{name: "no users", userData: "#cloud-config\nhostname: h\n"},
		{name: "not cloud-config", userData: "#!/bin/sh\nusers:\n  - name: mallory\n", exit: 3},
		{name: "header not on the first line", userData: "\n#cloud-config\nusers:\n  - name: mallory\n", exit: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ud := filepath.Join(dir, "user-data")
			if err := os.WriteFile(ud, []byte(tc.userData), 0o644); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(busybox, "sh", script, "--virtplane-ciuser", ud).Output()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.exit {
				t.Errorf("exit %d, want %d", code, tc.exit)
			}
			var got []string
			if s := strings.TrimSuffix(string(out), "\n"); s != "" {
				got = strings.Split(s, "\n")
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parsed\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

func TestFindCloudInitUser(t *testing.T) {
	key := "ssh-ed25519 AAAA alice@example"
	console := "[    3.1] random kernel line\r\n" +
		"VIRTPLANE-GUEST-CLOUDINIT-USER name=alice uid=1000 home=/home/alice keys=1 key0=" + testguest.KeySHA256(key) + "\r\n"
	u, ok, err := testguest.FindCloudInitUser(console)
	if !ok || err != nil {
		t.Fatalf("FindCloudInitUser = %v, %v", ok, err)
	}
	want := testguest.CloudInitUser{Name: "alice", Home: "/home/alice", UID: 1000, Keys: 1, KeySHA256: []string{testguest.KeySHA256(key)}}
	if !reflect.DeepEqual(u, want) {
		t.Errorf("got %+v, want %+v", u, want)
	}
	// printf %s 'ssh-ed25519 AAAA alice@example' | sha256sum, as the guest runs it.
	if got := testguest.KeySHA256(key); got != "e4ed40d8f9f81e85420b7ac463b8a5f46afd500493a9530e14734993d004be5d" {
		t.Errorf("KeySHA256 = %s", got)
	}
	if _, ok, _ := testguest.FindCloudInitUser("VIRTPLANE-GUEST-BOOTED hostname=h\n"); ok {
		t.Error("found a user in a console without one")
	}
	for _, bad := range []string{
		"VIRTPLANE-GUEST-CLOUDINIT-USER name=alice uid=x home=/home/alice keys=0\n",
		"VIRTPLANE-GUEST-CLOUDINIT-USER name=alice uid=1000 home=/home/alice keys=2 key0=ab\n",
		"VIRTPLANE-GUEST-CLOUDINIT-USER uid=1000 home=/ keys=0\n",
	} {
		if _, ok, err := testguest.FindCloudInitUser(bad); !ok || err == nil {
			t.Errorf("FindCloudInitUser(%q) = %v, %v; want an error", bad, ok, err)
		}
	}
}
