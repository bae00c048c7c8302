// Package firmware picks the EFI firmware build libvirt 9.0 would pick
// for a virtplane guest, from the host's QEMU firmware descriptors
// (/usr/share/qemu/firmware/*.json, /etc/qemu/firmware/*.json; QEMU's
// docs/interop/firmware.json), by libvirt's own rules: the node agent
// needs the build's VARS template before the first start of a guest whose
// NVRAM is on RBD (libvirt fills only files from it), and must import the
// one libvirt will then boot with, never a guessed path.
//
// libvirt's rules, as qemu_firmware.c and qemu_interop_config.c of
// libvirt 9.0 apply them to a domain that asks for firmware by feature
// (<os firmware='efi'> with secure-boot and enrolled-keys both yes or
// both no, q35, x86_64, no loader, no SEV, no S3/S4 setting):
//   - descriptors are the files of /usr/share/qemu/firmware and
//     /etc/qemu/firmware (the same name in /etc wins; an empty file there
//     masks it; names starting with "." and non-regular files are
//     skipped), taken in the order of their names;
//   - the first that matches is used: it has the "uefi" interface, a
//     target of the domain's architecture with a machine pattern (glob
//     with * and ?) matching the domain's canonical machine type, a
//     flash mapping in split mode (or a memory one), and the features
//     secure-boot and enrolled-keys exactly as asked (present when
//     asked for, absent when refused).
//
// TestMatchesLibvirt checks the choice against what the host's libvirtd
// resolves when it starts such a domain.
package firmware

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// DefaultDirs are the descriptor directories a system libvirtd reads,
// lowest priority first.
var DefaultDirs = []string{"/usr/share/qemu/firmware", "/etc/qemu/firmware"}

// Arch and MachineAlias are what virtplane's domains run (domxml): q35 is
// QEMU's alias of its newest pc-q35-X.Y, which libvirt puts in the domain
// before it matches descriptors.
const (
	Arch         = "x86_64"
	MachineAlias = "q35"
)

// Firmware is a build a descriptor names.
type Firmware struct {
	// Descriptor is the JSON file that chose it.
	Descriptor string
	// Executable is the loader (OVMF_CODE), NVRAMTemplate the VARS
	// template a new NVRAM starts from ("" for a memory-mapped build,
	// which keeps no variables).
	Executable, NVRAMTemplate string
}

// Resolver answers for one host.
type Resolver struct {
	// Dirs are the descriptor directories, lowest priority first;
	// DefaultDirs when nil.
	Dirs []string
	// Machine gives the canonical machine type of MachineAlias; nil asks
	// QEMU (QEMUMachine).
	Machine func(ctx context.Context) (string, error)

	mu      sync.Mutex
	machine string // cached once known
}

// EFI is the build libvirt picks for a virtplane EFI guest, with Secure
// Boot (and Microsoft's keys enrolled) or without.
func (r *Resolver) EFI(ctx context.Context, secureBoot bool) (Firmware, error) {
	machine, err := r.canonicalMachine(ctx)
	if err != nil {
		return Firmware{}, err
	}
	dirs := r.Dirs
	if dirs == nil {
		dirs = DefaultDirs
	}
	paths, err := descriptorPaths(dirs)
	if err != nil {
		return Firmware{}, err
	}
	for _, p := range paths {
		d, err := readDescriptor(p)
		if err != nil {
			// libvirt refuses to start any domain that asks by feature
			// while a descriptor does not parse; so does this.
			return Firmware{}, err
		}
		if d.matches(machine, secureBoot) {
			return d.firmware(p), nil
		}
	}
	return Firmware{}, fmt.Errorf("no firmware descriptor in %s offers UEFI for %s %s with secure-boot %s (Debian package ovmf)",
		strings.Join(dirs, ", "), Arch, machine, yesNo(secureBoot))
}

func (r *Resolver) canonicalMachine(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.machine != "" {
		return r.machine, nil
	}
	get := r.Machine
	if get == nil {
		get = QEMUMachine
	}
	m, err := get(ctx)
	if err != nil {
		return "", err
	}
	r.machine = m
	return m, nil
}

// QEMUMachine asks the host's QEMU which machine type q35 stands for
// ("q35 ... (alias of pc-q35-7.2)" in `-machine help`).
func QEMUMachine(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "qemu-system-"+Arch, "-machine", "help").Output()
	if err != nil {
		return "", fmt.Errorf("asking qemu-system-%s for its machine types: %w", Arch, err)
	}
	return aliasOf(string(out), MachineAlias)
}

// aliasOf finds what alias names in QEMU's machine list.
func aliasOf(list, alias string) (string, error) {
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != alias {
			continue
		}
		_, rest, ok := strings.Cut(line, "(alias of ")
		if m, _, ok2 := strings.Cut(rest, ")"); ok && ok2 && m != "" {
			return m, nil
		}
		return alias, nil // not an alias: the name itself
	}
	return "", fmt.Errorf("QEMU has no machine type %s", alias)
}

// descriptorPaths lists the descriptors in libvirt's order.
func descriptorPaths(dirs []string) ([]string, error) {
	byName := map[string]string{}
	sizes := map[string]int64{}
	for _, dir := range dirs {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("firmware descriptors: %w", err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			p := filepath.Join(dir, e.Name())
			fi, err := os.Stat(p)
			if err != nil {
				return nil, fmt.Errorf("firmware descriptors: %w", err)
			}
			if fi.Mode().IsRegular() {
				byName[e.Name()] = p // a later (more specific) dir wins
				sizes[e.Name()] = fi.Size()
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	var out []string
	for _, n := range names {
		if sizes[n] > 0 { // an empty file masks a less specific one
			out = append(out, byName[n])
		}
	}
	return out, nil
}

// descriptor is the part of a firmware descriptor the choice reads.
type descriptor struct {
	Interfaces []string `json:"interface-types"`
	Mapping    struct {
		Device     string `json:"device"`
		Mode       string `json:"mode"`
		Executable struct {
			Filename string `json:"filename"`
		} `json:"executable"`
		NVRAMTemplate struct {
			Filename string `json:"filename"`
		} `json:"nvram-template"`
		Filename string `json:"filename"` // a memory mapping's
	} `json:"mapping"`
	Targets []struct {
		Architecture string   `json:"architecture"`
		Machines     []string `json:"machines"`
	} `json:"targets"`
	Features []string `json:"features"`
}

func readDescriptor(path string) (*descriptor, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("firmware descriptor: %w", err)
	}
	var d descriptor
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("firmware descriptor %s: %w", path, err)
	}
	return &d, nil
}

func (d *descriptor) matches(machine string, secureBoot bool) bool {
	if !slices.Contains(d.Interfaces, "uefi") {
		return false
	}
	target := false
	for _, t := range d.Targets {
		if t.Architecture != Arch {
			continue
		}
		for _, m := range t.Machines {
			if globMatch(m, machine) {
				target = true
			}
		}
	}
	if !target {
		return false
	}
	switch d.Mapping.Device {
	case "flash":
		if d.Mapping.Mode != "" && d.Mapping.Mode != "split" {
			return false
		}
	case "memory":
	default:
		return false
	}
	return slices.Contains(d.Features, "secure-boot") == secureBoot &&
		slices.Contains(d.Features, "enrolled-keys") == secureBoot
}

func (d *descriptor) firmware(path string) Firmware {
	if d.Mapping.Device == "memory" {
		return Firmware{Descriptor: path, Executable: d.Mapping.Filename}
	}
	return Firmware{Descriptor: path, Executable: d.Mapping.Executable.Filename, NVRAMTemplate: d.Mapping.NVRAMTemplate.Filename}
}

// globMatch is GLib's g_pattern_match_simple, which libvirt matches
// machine types with: * is any run of characters, ? any one, nothing
// else is special.
func globMatch(pattern, s string) bool {
	for len(pattern) > 0 {
		switch pattern[0] {
		case '*':
			for i := len(s); i >= 0; i-- {
				if globMatch(pattern[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if s == "" {
				return false
			}
			_, n := utf8.DecodeRuneInString(s)
			pattern, s = pattern[1:], s[n:]
		default:
			if s == "" || s[0] != pattern[0] {
				return false
			}
			pattern, s = pattern[1:], s[1:]
		}
	}
	return s == ""
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
