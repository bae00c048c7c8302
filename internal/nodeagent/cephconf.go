package nodeagent

import (
	"context"
	"os/exec"
	"time"

	"libvirt.org/go/libvirtxml"
)

// apparmorCephDir is the one directory of ceph.conf files QEMU may read
// when libvirt confines it with AppArmor: the libvirt-qemu abstraction
// allows /etc/ceph/*.conf, and libvirt adds no network disk's <config
// file> to a domain's own profile.
const apparmorCephDir = "/etc/ceph"

// cephConfDir is where the storage room writes each rbd class's ceph.conf
// for QEMU (storage.ConfFile): the node data dir's "ceph" (traversable by
// QEMU's user, as the preflight checks), or /etc/ceph where libvirt runs
// QEMU under AppArmor.
func (a *Agent) cephConfDir() string {
	dir := a.layout.CephConfDir()
	if local, err := a.localQEMU(); err != nil || !local {
		return dir
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "virsh", "-c", a.opts.LibvirtURI, "capabilities").Output()
	if err != nil {
		a.log.Warn("reading libvirt's capabilities for its security models; assuming no AppArmor", "err", err)
		return dir
	}
	var caps libvirtxml.Caps
	if err := caps.Unmarshal(string(out)); err != nil {
		a.log.Warn("reading libvirt's capabilities for its security models; assuming no AppArmor", "err", err)
		return dir
	}
	for _, m := range caps.Host.SecModel {
		if m.Name == "apparmor" {
			a.log.Info("libvirt confines QEMU with AppArmor: rbd classes' ceph.conf files for QEMU go to "+apparmorCephDir, "files", "virtplane-<class>.conf")
			return apparmorCephDir
		}
	}
	return dir
}
