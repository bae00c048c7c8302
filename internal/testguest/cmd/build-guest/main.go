// Command build-guest builds the virtplane test guest: a Debian kernel
// (vmlinuz), a busybox initramfs (initrd.img) whose /init is
// internal/testguest/init.sh, and a bootable disk image holding both
// (disk.qcow2, disk.go). `make guest` runs it.
//
// Inputs are Debian packages fetched with apt-get download into a cache and
// unpacked with dpkg-deb; the output is reproducible (same packages and
// builder, same bytes) and a rebuild with unchanged inputs only checks a
// manifest.
package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
)

// builderVersion changes when the output changes for reasons the
// manifest key cannot see. 2: the net module group, the network applets
// and the udhcpc script. 3: the disk image.
const builderVersion = 3

var verbose = true

func logf(format string, args ...any) {
	if verbose {
		fmt.Fprintf(os.Stderr, "build-guest: "+format+"\n", args...)
	}
}

type options struct {
	out, cache       string
	kernelPkg, bbPkg string
	force            bool
}

func main() {
	var o options
	flag.StringVar(&o.out, "out", "bin/guest", "output directory for vmlinuz and initrd.img")
	flag.StringVar(&o.cache, "cache", defaultCache(), "cache directory for downloaded .deb files ($VIRTPLANE_GUEST_CACHE)")
	flag.StringVar(&o.kernelPkg, "kernel-package", "linux-image-amd64", "Debian kernel package (a metapackage is followed to the real one)")
	flag.StringVar(&o.bbPkg, "busybox-package", "busybox-static", "Debian package with a static /bin/busybox")
	flag.BoolVar(&o.force, "force", false, "rebuild even if the outputs are up to date")
	quiet := flag.Bool("q", false, "print nothing when up to date")
	flag.Parse()
	verbose = !*quiet
	if err := build(o); err != nil {
		fmt.Fprintln(os.Stderr, "build-guest: error:", err)
		os.Exit(1)
	}
}

func defaultCache() string {
	if d := os.Getenv("VIRTPLANE_GUEST_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "virtplane", "guest")
	}
	return filepath.Join(os.TempDir(), "virtplane-guest-cache")
}

func build(o options) error {
	fast, err := fastKey(o)
	if err != nil {
		return err
	}
	if !o.force && upToDate(o.out, fast) {
		logf("%s is up to date", o.out)
		return nil
	}
	if err := ensureTools(); err != nil {
		return err
	}
	kernelDeb, bbDeb, err := resolveAll(o.kernelPkg, o.bbPkg)
	if err != nil {
		return fmt.Errorf("resolving packages: %w", err)
	}
	tools, err := hostToolVersions()
	if err != nil {
		return err
	}
	key, err := inputKey(kernelDeb, bbDeb, tools)
	if err != nil {
		return err
	}
	if !o.force && upToDate(o.out, key) {
		logf("%s is up to date (%s %s, %s %s)", o.out, kernelDeb.Name, kernelDeb.Version, bbDeb.Name, bbDeb.Version)
		return refreshFastKey(o.out, fast)
	}

	kpath, err := fetch(kernelDeb, o.cache)
	if err != nil {
		return fmt.Errorf("fetching the kernel: %w", err)
	}
	bpath, err := fetch(bbDeb, o.cache)
	if err != nil {
		return fmt.Errorf("fetching busybox: %w", err)
	}

	// Unpacked trees are big (the kernel's is ~400 MB) and only needed
	// while building, so they live in a temporary directory.
	work, err := os.MkdirTemp(o.cache, ".unpack-")
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer os.RemoveAll(work)
	kroot, broot := filepath.Join(work, "kernel"), filepath.Join(work, "busybox")
	logf("unpacking %s", filepath.Base(kpath))
	if err := extract(kpath, kroot); err != nil {
		return err
	}
	if err := extract(bpath, broot); err != nil {
		return err
	}

	vmlinuz, release, err := findKernel(kroot)
	if err != nil {
		return err
	}
	modDir, err := firstDir(filepath.Join(kroot, "lib/modules", release), filepath.Join(kroot, "usr/lib/modules", release))
	if err != nil {
		return fmt.Errorf("kernel %s: modules: %w", release, err)
	}
	km, err := loadKernelModules(modDir)
	if err != nil {
		return err
	}
	groups, err := orderGroups(km, moduleGroups)
	if err != nil {
		return fmt.Errorf("kernel %s: %w", release, err)
	}
	busybox, err := readFirst(filepath.Join(broot, "bin/busybox"), filepath.Join(broot, "usr/bin/busybox"))
	if err != nil {
		return fmt.Errorf("%s: %w", bbDeb.Name, err)
	}

	t, err := buildTree(initramfsInputs{busybox: busybox, modulesDir: modDir, groups: groups})
	if err != nil {
		return err
	}
	var initrd bytes.Buffer
	if err := writeInitramfs(t, &initrd); err != nil {
		return err
	}
	kernel, err := os.ReadFile(vmlinuz)
	if err != nil {
		return fmt.Errorf("reading the kernel: %w", err)
	}
	outputs := []output{{testguest.KernelFile, kernel}, {testguest.InitrdFile, initrd.Bytes()}}
	if elfKernel, err := extractVmlinux(kernel); err == nil {
		outputs = append(outputs, output{testguest.ELFKernelFile, elfKernel})
	} else {
		// Still bootable, only slower: testguest.Kernel falls back.
		logf("no %s (guests boot the compressed kernel, slower): %v", testguest.ELFKernelFile, err)
	}

	logf("building %s", testguest.DiskFile)
	disk, err := buildDisk(work, kernel, initrd.Bytes())
	if err != nil {
		return fmt.Errorf("building %s: %w", testguest.DiskFile, err)
	}
	outputs = append(outputs, output{testguest.DiskFile, disk})

	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("output: %w", err)
	}
	// Drop the old manifest first and write the new one last, so a build
	// interrupted halfway is never taken for a finished one.
	os.Remove(filepath.Join(o.out, manifestFile))
	m := manifest{
		Key: key, FastKey: fast, Kernel: kernelDeb, Busybox: bbDeb, KernelRelease: release,
		Modules: moduleNames(groups), Outputs: map[string]string{}, GoVersion: runtime.Version(),
	}
	os.Remove(filepath.Join(o.out, testguest.ELFKernelFile))
	for _, f := range outputs {
		if err := fsutil.WriteFileAtomic(filepath.Join(o.out, f.name), f.data, 0o644); err != nil {
			return err
		}
		sum := sha256.Sum256(f.data)
		m.Outputs[f.name] = hex.EncodeToString(sum[:])
		logf("wrote %s (%d bytes)", filepath.Join(o.out, f.name), len(f.data))
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return fsutil.WriteFileAtomic(filepath.Join(o.out, manifestFile), append(mb, '\n'), 0o644)
}

type output struct {
	name string
	data []byte
}

func moduleNames(groups map[string][]string) map[string][]string {
	out := map[string][]string{}
	for g, paths := range groups {
		for _, p := range paths {
			out[g] = append(out[g], strings.TrimSuffix(filepath.Base(p), ".ko"))
		}
	}
	return out
}

// findKernel returns the one /boot/vmlinuz-<release> in an unpacked
// kernel package.
func findKernel(root string) (path, release string, err error) {
	got, err := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
	if err != nil {
		return "", "", err
	}
	if len(got) != 1 {
		return "", "", fmt.Errorf("kernel package has %d /boot/vmlinuz-* files, want 1 (is it a linux-image package?)", len(got))
	}
	return got[0], strings.TrimPrefix(filepath.Base(got[0]), "vmlinuz-"), nil
}

func firstDir(paths ...string) (string, error) {
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			return p, nil
		}
	}
	return "", fmt.Errorf("none of %s exists", strings.Join(paths, ", "))
}

func readFirst(paths ...string) ([]byte, error) {
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err == nil {
			return b, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("none of %s exists", strings.Join(paths, ", "))
}
