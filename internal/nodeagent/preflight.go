package nodeagent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// preflight refuses to start a node whose guests could not start: QEMU
// runs as its own user (libvirt-qemu on Debian) and must traverse every
// directory above the node data dir and the image dir to open disks,
// kernels and console logs. A checkout under /root (0700) is the usual
// case; refusing here, with the fix, beats every VM failing later with
// "Permission denied" from libvirt.
//
// Like the guest firewall, only for guests that are QEMU processes on
// this host: uids is empty otherwise (qemuUsers).
func (a *Agent) preflight(uids []uint32) error {
	for _, uid := range uids {
		who, err := lookupQEMUUser(uid)
		if err != nil {
			return fmt.Errorf("preflight: %w", err)
		}
		for _, d := range []struct{ dir, flag string }{
			{a.opts.NodeDataDir, "--node-data-dir (default <data-dir>/node)"},
			{a.opts.ImageDir, "--image-dir (default <data-dir>/images)"},
		} {
			if err := who.canReach(d.dir, hasACL); err != nil {
				return fmt.Errorf("preflight: %w; use a %s under /var/lib, or let it through: %s", err, d.flag, fixFor(err))
			}
		}
	}
	return nil
}

// qemuUser is who QEMU runs as, for permission checks.
type qemuUser struct {
	name string
	uid  uint32
	gids []uint32
}

func lookupQEMUUser(uid uint32) (qemuUser, error) {
	q := qemuUser{name: strconv.FormatUint(uint64(uid), 10), uid: uid}
	u, err := user.LookupId(q.name)
	if err != nil {
		// A uid without a passwd entry: no groups but its own.
		return q, nil
	}
	q.name = u.Username
	groups, err := u.GroupIds()
	if err != nil {
		groups = []string{u.Gid}
	}
	for _, g := range append(groups, u.Gid) {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			q.gids = append(q.gids, uint32(n))
		}
	}
	return q, nil
}

// unreachable names the directory that stops QEMU.
type unreachable struct {
	dir    string
	mode   fs.FileMode
	target string
	who    qemuUser
}

func (e *unreachable) Error() string {
	return fmt.Sprintf("%s is %04o: QEMU's user %s (uid %d) cannot reach %s", e.dir, e.mode.Perm(), e.who.name, e.who.uid, e.target)
}

// fixFor is the command that lets QEMU through the directory err names.
func fixFor(err error) string {
	var u *unreachable
	if errors.As(err, &u) {
		return "chmod o+x " + u.dir
	}
	return "see the error"
}

// canReach checks the search (x) permission of q on every existing
// directory from / down to dir; directories not made yet are the agent's
// to create with its own modes. A directory with an ACL is taken as
// reachable: mode bits alone cannot tell, and a false refusal is worse
// than libvirt's own error later.
func (q qemuUser) canReach(dir string, acl func(string) bool) error {
	dir = filepath.Clean(dir)
	var chain []string
	for p := dir; ; p = filepath.Dir(p) {
		chain = append(chain, p)
		if p == filepath.Dir(p) {
			break
		}
	}
	slices.Reverse(chain)
	for _, p := range chain {
		st, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if acl(p) {
			continue
		}
		sys, ok := st.Sys().(*syscall.Stat_t)
		if !ok {
			continue
		}
		m := st.Mode().Perm()
		switch {
		case sys.Uid == q.uid:
			if m&0o100 != 0 {
				continue
			}
		case slices.Contains(q.gids, sys.Gid):
			if m&0o010 != 0 {
				continue
			}
		default:
			if m&0o001 != 0 {
				continue
			}
		}
		return &unreachable{dir: p, mode: m, target: dir, who: q}
	}
	return nil
}

// hasACL reports whether p carries a POSIX access ACL.
func hasACL(p string) bool {
	_, err := unix.Getxattr(p, "system.posix_acl_access", nil)
	return err == nil
}
