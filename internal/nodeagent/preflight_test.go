package nodeagent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A data dir under a 0700 directory (a checkout in /root) is refused with
// the directory and the fix; under traversable parents it passes, as it
// does for the directory's owner and group, and for one with an ACL.
func TestQEMUCanReach(t *testing.T) {
	// t.TempDir's own parent is 0700; open both for this test.
	root := t.TempDir()
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	home := filepath.Join(root, "home")
	data := filepath.Join(home, "src", "vp", ".demo", "data", "node")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	noACL := func(string) bool { return false }
	qemu := qemuUser{name: "libvirt-qemu", uid: 64055, gids: []uint32{64055, 993}}
	err := qemu.canReach(data, noACL)
	var u *unreachable
	if !errors.As(err, &u) || u.dir != home {
		t.Fatalf("err = %v, want %s named", err, home)
	}
	if msg := err.Error(); !strings.Contains(msg, home+" is 0700") || !strings.Contains(msg, "libvirt-qemu (uid 64055) cannot reach "+data) {
		t.Fatalf("message %q", msg)
	}
	if fix := fixFor(err); fix != "chmod o+x "+home {
		t.Fatalf("fix %q", fix)
	}

	// setHome gives home an owner, a group and a mode.
	setHome := func(uid, gid int, mode os.FileMode) {
		t.Helper()
		if err := os.Chown(home, uid, gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(home, mode); err != nil {
			t.Fatal(err)
		}
	}

	// The owner and the group pass through their own bits.
	setHome(64055, 0, 0o700)
	if err := qemu.canReach(data, noACL); err != nil {
		t.Fatalf("owner: %v", err)
	}
	setHome(0, 993, 0o710)
	if err := qemu.canReach(data, noACL); err != nil {
		t.Fatalf("group: %v", err)
	}
	// Owner bits alone decide for the owner, even when others may pass.
	setHome(64055, 0, 0o611)
	if err := qemu.canReach(data, noACL); err == nil {
		t.Fatal("an owner without x on its own directory passed")
	}
	if err := qemu.canReach(data, func(p string) bool { return p == home }); err != nil {
		t.Fatalf("a directory with an ACL is left to the ACL: %v", err)
	}
	// o+x is the fix; directories still to be made are the agent's.
	setHome(0, 0, 0o711)
	if err := qemu.canReach(filepath.Join(data, "not", "yet"), noACL); err != nil {
		t.Fatalf("after chmod o+x: %v", err)
	}
}
