package main

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// moduleGroup is a set of modules /init loads together from
// /etc/virtplane/modules.<name>, dependencies first. The first group,
// base, is always loaded; every later group is loaded on its own flag, so
// it lists all it needs beyond base, even modules another group lists too
// (/init skips a module that is already loaded).
type moduleGroup struct {
	name    string
	modules []moduleWant
}

type moduleWant struct {
	name string
	why  string
}

// moduleGroups are the drivers the guest needs from the Debian kernel,
// which builds all of them as modules (=m in its config). A module that a
// kernel builds in is skipped; one it lacks is an error.
var moduleGroups = []moduleGroup{
	{"base", []moduleWant{
		{"button", "ACPI power button: virsh shutdown arrives as a KEY_POWER input event"},
		{"evdev", "/dev/input/event*, which busybox acpid reads"},
		{"pvpanic_mmio", "<panic model='isa'/> is ACPI device QEMU0001: tells QEMU about a kernel panic"},
		{"pvpanic_pci", "<panic model='pvpanic'/>, the PCI flavour of the same"},
	}},
	// Loaded only when virtplane.cidata or virtplane.persist asks for
	// disks: probing controllers costs boot time under TCG.
	{"storage", []moduleWant{
		{"virtio_pci", "virtio devices on PCI"},
		{"virtio_blk", "virtio disks (/dev/vd*)"},
		{"virtio_scsi", "virtio-scsi disks and CD-ROMs"},
		{"ahci", "SATA controller (q35, or bus='sata' on pc)"},
		{"ata_piix", "IDE controller of the pc machine type"},
		{"sd_mod", "SCSI/SATA disks (/dev/sd*)"},
		{"sr_mod", "SCSI/SATA/IDE CD-ROMs (/dev/sr*)"},
		{"isofs", "ISO 9660, the cidata filesystem"},
	}},
	// Loaded only with virtplane.net or virtplane.netprobe: one driver
	// per NIC model the API offers (packet sockets, which udhcpc needs,
	// and IPv6 are built in).
	{"net", []moduleWant{
		{"virtio_pci", "virtio devices on PCI"},
		{"virtio_net", "model virtio, the API's default NIC"},
		{"e1000", "model e1000"},
		{"8139too", "model rtl8139"},
	}},
	// Loaded only with virtplane.ga: the guest agent stand-in's
	// virtio-serial port (org.qemu.guest_agent.0, on every virtplane
	// domain).
	{"agent", []moduleWant{
		{"virtio_pci", "virtio devices on PCI"},
		{"virtio_console", "virtio-serial ports (/dev/vport*), the guest agent's channel"},
	}},
}

// normalize is the kernel's module-name rule: '-' and '_' are the same.
func normalize(name string) string { return strings.ReplaceAll(name, "-", "_") }

// kernelModules indexes one kernel's module tree.
type kernelModules struct {
	dir     string            // .../lib/modules/<release>
	paths   map[string]string // name -> path relative to dir
	builtin map[string]bool
	deps    func(path string) ([]string, error) // depends, or a fake in tests
}

func loadKernelModules(dir string) (*kernelModules, error) {
	km := &kernelModules{dir: dir, paths: map[string]string{}, builtin: map[string]bool{}, deps: depends}
	err := filepath.WalkDir(filepath.Join(dir, "kernel"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		base := d.Name()
		switch {
		case strings.HasSuffix(base, ".ko"):
		case strings.Contains(base, ".ko."):
			// busybox insmod cannot be relied on to decompress, and the
			// standard library has no xz or zstd.
			return fmt.Errorf("%s: compressed kernel modules are not supported", path)
		default:
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		km.paths[normalize(strings.TrimSuffix(base, ".ko"))] = rel
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("indexing modules: %w", err)
	}
	// modules.builtin lists built-in modules by the path they would have.
	if b, err := os.ReadFile(filepath.Join(dir, "modules.builtin")); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			base := filepath.Base(strings.TrimSpace(sc.Text()))
			km.builtin[normalize(strings.TrimSuffix(base, ".ko"))] = true
		}
	} else if !os.IsNotExist(err) {
		return nil, fmt.Errorf("reading modules.builtin: %w", err)
	}
	return km, nil
}

// depends reads a module's dependencies from its .modinfo section. Debian's
// package ships no modules.dep (depmod makes it at install time); the
// "depends=" that modpost records is what depmod would derive.
func depends(path string) ([]string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("module %s: %w", path, err)
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("module %s: no .modinfo section", path)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("module %s: .modinfo: %w", path, err)
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			var deps []string
			for _, d := range strings.Split(string(v), ",") {
				if d = strings.TrimSpace(d); d != "" {
					deps = append(deps, normalize(d))
				}
			}
			return deps, nil
		}
	}
	return nil, nil
}

// order returns the loadable modules needed for want, each after its
// dependencies, leaving out built-in ones and those in loaded (which it
// extends). The result is relative paths in the module tree.
func (km *kernelModules) order(want []moduleWant, loaded map[string]bool) ([]string, error) {
	var out []string
	visiting := map[string]bool{}
	var visit func(name, from string) error
	visit = func(name, from string) error {
		name = normalize(name)
		if loaded[name] || km.builtin[name] {
			return nil
		}
		if visiting[name] {
			return fmt.Errorf("module dependency cycle through %s", name)
		}
		rel, ok := km.paths[name]
		if !ok {
			if from != "" {
				return fmt.Errorf("module %s (needed by %s) is neither in the kernel package nor built in", name, from)
			}
			return fmt.Errorf("module %s is neither in the kernel package nor built in", name)
		}
		visiting[name] = true
		deps, err := km.deps(filepath.Join(km.dir, rel))
		if err != nil {
			return err
		}
		sort.Strings(deps) // modinfo order is build order; make ours stable
		for _, d := range deps {
			if err := visit(d, name); err != nil {
				return err
			}
		}
		visiting[name] = false
		loaded[name] = true
		out = append(out, rel)
		return nil
	}
	for _, w := range want {
		if err := visit(w.name, ""); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// orderGroups orders each group's modules: base first, then every other
// group on top of base alone, since /init loads each of those only on its
// own flag.
func orderGroups(km *kernelModules, groups []moduleGroup) (map[string][]string, error) {
	out := map[string][]string{}
	base := map[string]bool{}
	for i, g := range groups {
		loaded := base
		if i > 0 {
			loaded = maps.Clone(base)
		}
		mods, err := km.order(g.modules, loaded)
		if err != nil {
			return nil, err
		}
		out[g.name] = mods
	}
	return out, nil
}
