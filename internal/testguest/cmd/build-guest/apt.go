package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// debianTools are the host commands the builder runs, with the Debian
// package that ships each.
var debianTools = []struct{ cmd, pkg string }{
	{"apt-get", "apt"},
	{"apt-cache", "apt"},
	{"dpkg-deb", "dpkg"},
	{"xz", "xz-utils"},
}

// ensureTools installs missing Debian tools, which needs root.
func ensureTools() error {
	var missing []string
	for _, t := range append(debianTools, diskTools...) {
		if _, err := lookTool(t.cmd); err != nil && !contains(missing, t.pkg) {
			missing = append(missing, t.pkg)
		}
	}
	for _, f := range diskFiles {
		if _, err := os.Stat(f.path); err != nil && !contains(missing, f.pkg) {
			missing = append(missing, f.pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	_, aptErr := exec.LookPath("apt-get")
	if aptErr != nil || os.Geteuid() != 0 {
		return fmt.Errorf("the guest builder needs the Debian packages %s (it runs on Debian/Ubuntu hosts); "+
			"install them as root: apt-get install %s", strings.Join(missing, " "), strings.Join(missing, " "))
	}
	logf("installing %s", strings.Join(missing, " "))
	args := append([]string{"install", "-y", "--no-install-recommends"}, missing...)
	if _, err := run("", "apt-get", args...); err != nil {
		return fmt.Errorf("installing %s: %w", strings.Join(missing, " "), err)
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// debPackage is one resolved Debian binary package.
type debPackage struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	Arch    string `json:"arch"`
	SHA256  string `json:"sha256"`
}

// fileName is how the package is cached: apt-get download's own naming,
// which escapes the epoch colon.
func (p debPackage) fileName() string {
	return fmt.Sprintf("%s_%s_%s.deb", p.Name, strings.ReplaceAll(p.Version, ":", "%3a"), p.Arch)
}

// aptShow returns the candidate version's control fields for pkg.
func aptShow(pkg string) (map[string]string, error) {
	out, err := run("", "apt-cache", "show", "--no-all-versions", pkg)
	if err != nil {
		return nil, err
	}
	fields := parseControl(out)
	if fields["Package"] == "" || fields["Version"] == "" {
		return nil, fmt.Errorf("apt-cache show %s: no candidate version", pkg)
	}
	return fields, nil
}

// parseControl parses the first stanza of Debian control data.
func parseControl(data []byte) map[string]string {
	fields := map[string]string{}
	var last string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(fields) > 0 {
				break
			}
			continue
		}
		if line[0] == ' ' || line[0] == '\t' {
			if last != "" {
				fields[last] += "\n" + strings.TrimSpace(line)
			}
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		last = k
		fields[k] = strings.TrimSpace(v)
	}
	return fields
}

// dependsWithPrefix returns the first package in a Depends field whose
// name starts with prefix (alternatives included).
func dependsWithPrefix(depends, prefix string) string {
	for _, dep := range strings.Split(depends, ",") {
		for _, alt := range strings.Split(dep, "|") {
			name, _, _ := strings.Cut(strings.TrimSpace(alt), " ")
			name, _, _ = strings.Cut(name, ":") // drop a :any qualifier
			if strings.HasPrefix(name, prefix) {
				return name
			}
		}
	}
	return ""
}

// resolvePackage finds the candidate version of pkg. When follow is set
// and pkg is a metapackage (linux-image-amd64), it follows the dependency
// whose name starts with follow to the package that holds the files.
func resolvePackage(pkg, follow string) (debPackage, error) {
	for range 4 {
		f, err := aptShow(pkg)
		if err != nil {
			return debPackage{}, err
		}
		if follow != "" {
			if dep := dependsWithPrefix(f["Depends"], follow); dep != "" && dep != pkg {
				pkg = dep
				continue
			}
		}
		p := debPackage{Name: f["Package"], Version: f["Version"], Arch: f["Architecture"], SHA256: f["SHA256"]}
		if p.Arch == "" {
			return debPackage{}, fmt.Errorf("apt-cache show %s: no Architecture field", pkg)
		}
		return p, nil
	}
	return debPackage{}, fmt.Errorf("resolving %s: dependency chain too long", pkg)
}

// resolveAll resolves the packages, running apt-get update once if the
// package lists do not know one of them.
func resolveAll(kernelPkg, busyboxPkg string) (kernel, busybox debPackage, err error) {
	resolve := func() error {
		var err error
		if kernel, err = resolvePackage(kernelPkg, "linux-image-"); err != nil {
			return err
		}
		busybox, err = resolvePackage(busyboxPkg, "")
		return err
	}
	if err = resolve(); err == nil {
		return kernel, busybox, nil
	}
	logf("%v; updating the package lists", err)
	if uerr := aptUpdate(); uerr != nil {
		return kernel, busybox, fmt.Errorf("%w (and %w)", err, uerr)
	}
	err = resolve()
	return kernel, busybox, err
}

func aptUpdate() error {
	if os.Geteuid() != 0 {
		return errors.New("apt-get update needs root: run it, or `make guest` as root")
	}
	if _, err := run("", "apt-get", "update"); err != nil {
		return fmt.Errorf("apt-get update: %w", err)
	}
	return nil
}

// aptListsDir is apt's default Dir::State::lists.
const aptListsDir = "/var/lib/apt/lists"

// aptListsFingerprint summarises the package lists (names, sizes, mtimes);
// "" when there are none to go by.
func aptListsFingerprint() string {
	entries, err := os.ReadDir(aptListsDir)
	if err != nil {
		return ""
	}
	h := sha256.New()
	n := 0
	for _, e := range entries {
		if !e.Type().IsRegular() || e.Name() == "lock" {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return ""
		}
		fmt.Fprintf(h, "%s %d %d\n", e.Name(), fi.Size(), fi.ModTime().UnixNano())
		n++
	}
	if n == 0 {
		return ""
	}
	return hex.EncodeToString(h.Sum(nil))
}

// fetch returns the path of p's .deb in cacheDir/debs, downloading it with
// apt-get download (which checks it against the signed package lists) when
// the cache does not hold a copy with the expected SHA256.
func fetch(p debPackage, cacheDir string) (string, error) {
	debs := filepath.Join(cacheDir, "debs")
	if err := os.MkdirAll(debs, 0o755); err != nil {
		return "", fmt.Errorf("cache: %w", err)
	}
	dst := filepath.Join(debs, p.fileName())
	if sum, err := fileSHA256(dst); err == nil && (p.SHA256 == "" || sum == p.SHA256) {
		return dst, nil
	}
	err := download(p, debs, dst)
	if err != nil {
		// The lists may name a version the mirror has since dropped.
		logf("%v; updating the package lists and retrying", err)
		if uerr := aptUpdate(); uerr != nil {
			return "", fmt.Errorf("%w (and %w)", err, uerr)
		}
		err = download(p, debs, dst)
	}
	if err != nil {
		return "", err
	}
	if sum, err := fileSHA256(dst); err != nil {
		return "", err
	} else if p.SHA256 != "" && sum != p.SHA256 {
		return "", fmt.Errorf("%s: sha256 %s, package lists say %s", dst, sum, p.SHA256)
	}
	return dst, nil
}

func download(p debPackage, debs, dst string) error {
	tmp, err := os.MkdirTemp(debs, ".download-")
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	defer os.RemoveAll(tmp)
	args := []string{"download"}
	if os.Geteuid() == 0 {
		// apt drops to user _apt for downloads, which cannot write to a
		// root-owned cache directory.
		args = append(args, "-o", "APT::Sandbox::User=root")
	}
	args = append(args, p.Name+"="+p.Version)
	logf("downloading %s %s", p.Name, p.Version)
	if _, err := run(tmp, "apt-get", args...); err != nil {
		return err
	}
	got, err := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if err != nil || len(got) != 1 {
		return fmt.Errorf("apt-get download %s left %d .deb files", p.Name, len(got))
	}
	if err := os.Rename(got[0], dst); err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	return nil
}

// extract unpacks a .deb's file tree into dir.
func extract(deb, dir string) error {
	if _, err := run("", "dpkg-deb", "-x", deb, dir); err != nil {
		return err
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hashing %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// run runs a command with an argument list (never a shell) and returns
// its stdout; on failure the error carries stderr.
func run(dir, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 2000 {
			msg = msg[len(msg)-2000:]
		}
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, msg)
	}
	return out, nil
}
