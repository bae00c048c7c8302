package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest/cpio"
)

// applets are the busybox commands init.sh runs, linked in /bin.
// (echo, printf, test and [ are ash builtins.)
var applets = []string{
	"acpid", "awk", "cat", "chmod", "chown", "cut", "dd", "grep", "head", "hostname", "httpd", "insmod",
	"ip", "mkdir", "mount", "poweroff", "sh", "sha256sum", "sleep", "sync", "tail", "timeout",
	"tr", "truncate", "udhcpc", "umount", "wc", "wget",
}

// acpid maps the KEY_POWER event to the action "PWRF/00000080" and runs
// that file under its config directory.
const (
	acpidConf    = "PWRF PWRF/00000080\n"
	acpidHandler = "#!/bin/sh\nexec /init --virtplane-poweroff acpi\n"
)

// udhcpcScript is what udhcpc runs on each DHCP event ($1: deconfig,
// bound, renew...; the lease in the environment); /init configures the
// interface.
const (
	udhcpcScriptPath = "etc/virtplane/udhcpc.script"
	udhcpcScript     = "#!/bin/sh\nexec /init --virtplane-dhcp \"$@\"\n"
)

type fileEntry struct {
	mode     uint32 // cpio type | permissions
	data     []byte
	target   string // symlink
	maj, min uint32 // device node
}

// tree is the initramfs contents by path (no leading slash).
type tree map[string]fileEntry

func (t tree) dir(p string) {
	for ; p != "." && p != "/" && p != ""; p = path.Dir(p) {
		if _, ok := t[p]; !ok {
			t[p] = fileEntry{mode: cpio.TypeDir | 0o755}
		}
	}
}

func (t tree) file(p string, perm uint32, data []byte) {
	t.dir(path.Dir(p))
	t[p] = fileEntry{mode: cpio.TypeReg | perm, data: data}
}

func (t tree) symlink(p, target string) {
	t.dir(path.Dir(p))
	t[p] = fileEntry{mode: cpio.TypeSymlink | 0o777, target: target}
}

// initramfsInputs is what goes into the guest besides the fixed files.
type initramfsInputs struct {
	busybox    []byte
	modulesDir string              // .../lib/modules/<release>
	groups     map[string][]string // group -> module paths, load order
}

func buildTree(in initramfsInputs) (tree, error) {
	t := tree{}
	for _, d := range []string{"dev", "proc", "sys", "tmp", "run", "mnt", "etc", "lib/modules"} {
		t.dir(d)
	}
	// The kernel opens /dev/console for init before /init can mount
	// devtmpfs; without the node init starts with no stdio.
	t["dev/console"] = fileEntry{mode: cpio.TypeChar | 0o600, maj: 5, min: 1}

	t.file("bin/busybox", 0o755, in.busybox)
	for _, a := range applets {
		if !bytes.Contains(in.busybox, []byte("\x00"+a+"\x00")) {
			return nil, fmt.Errorf("busybox has no %q applet", a)
		}
		if a != "busybox" {
			t.symlink("bin/"+a, "busybox")
		}
	}
	t.file("init", 0o755, []byte(testguest.InitScript))
	t.file(testguest.GuestAgentPath, 0o755, []byte(testguest.GuestAgentScript))
	t.file("etc/acpid.conf", 0o644, []byte(acpidConf))
	t.file("etc/acpi/PWRF/00000080", 0o755, []byte(acpidHandler))
	t.file(udhcpcScriptPath, 0o755, []byte(udhcpcScript))

	groupNames := make([]string, 0, len(in.groups))
	for g := range in.groups {
		groupNames = append(groupNames, g)
	}
	sort.Strings(groupNames)
	seen := map[string]string{}
	for _, g := range groupNames {
		var list strings.Builder
		for _, rel := range in.groups[g] {
			base := filepath.Base(rel)
			// Groups may share modules (virtio_pci: disks and NICs);
			// the file is stored once.
			if prev, dup := seen[base]; dup && prev != rel {
				return nil, fmt.Errorf("modules %s and %s share a file name", prev, rel)
			} else if !dup {
				seen[base] = rel
				data, err := os.ReadFile(filepath.Join(in.modulesDir, rel))
				if err != nil {
					return nil, fmt.Errorf("reading module: %w", err)
				}
				t.file("lib/modules/"+base, 0o644, data)
			}
			list.WriteString(base + "\n")
		}
		t.file("etc/virtplane/modules."+g, 0o644, []byte(list.String()))
	}
	return t, nil
}

// writeInitramfs writes t as a gzip-compressed newc cpio archive. Entries
// are sorted (so parents precede children) and carry no timestamps or
// owners, so equal inputs give byte-identical archives.
func writeInitramfs(t tree, out *bytes.Buffer) error {
	names := make([]string, 0, len(t))
	for n := range t {
		names = append(names, n)
	}
	sort.Strings(names)

	zw, err := gzip.NewWriterLevel(out, gzip.BestCompression)
	if err != nil {
		return fmt.Errorf("gzip: %w", err)
	}
	cw := cpio.NewWriter(zw)
	for _, n := range names {
		e := t[n]
		switch {
		case e.mode&cpio.TypeMask == cpio.TypeSymlink:
			err = cw.WriteSymlink(n, e.target, 0)
		default:
			err = cw.WriteHeader(&cpio.Header{Name: n, Mode: e.mode, Size: int64(len(e.data)), RDevMajor: e.maj, RDevMinor: e.min})
			if err == nil && len(e.data) > 0 {
				_, err = cw.Write(e.data)
			}
		}
		if err != nil {
			return fmt.Errorf("initramfs %s: %w", n, err)
		}
	}
	if err := cw.Close(); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("initramfs: gzip: %w", err)
	}
	return nil
}
