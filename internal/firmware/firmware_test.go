package firmware

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Debian 12's descriptors (package ovmf 2022.11), as they are.
const (
	secureEnrolled = `{"interface-types": ["uefi"],
 "mapping": {"device": "flash", "executable": {"filename": "/usr/share/OVMF/OVMF_CODE_4M.ms.fd", "format": "raw"},
  "nvram-template": {"filename": "/usr/share/OVMF/OVMF_VARS_4M.ms.fd", "format": "raw"}},
 "targets": [{"architecture": "x86_64", "machines": ["pc-q35-*"]}],
 "features": ["acpi-s3", "amd-sev", "enrolled-keys", "requires-smm", "secure-boot", "verbose-dynamic"], "tags": []}`
	secureEmpty = `{"interface-types": ["uefi"],
 "mapping": {"device": "flash", "executable": {"filename": "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd", "format": "raw"},
  "nvram-template": {"filename": "/usr/share/OVMF/OVMF_VARS_4M.fd", "format": "raw"}},
 "targets": [{"architecture": "x86_64", "machines": ["pc-q35-*"]}],
 "features": ["acpi-s3", "amd-sev", "requires-smm", "secure-boot", "verbose-dynamic"], "tags": []}`
	plain = `{"interface-types": ["uefi"],
 "mapping": {"device": "flash", "executable": {"filename": "/usr/share/OVMF/OVMF_CODE_4M.fd", "format": "raw"},
  "nvram-template": {"filename": "/usr/share/OVMF/OVMF_VARS_4M.fd", "format": "raw"}},
 "targets": [{"architecture": "x86_64", "machines": ["pc-i440fx-*", "pc-q35-*"]}],
 "features": ["acpi-s3", "amd-sev", "verbose-dynamic"], "tags": []}`
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func resolver(dirs ...string) *Resolver {
	return &Resolver{Dirs: dirs, Machine: func(context.Context) (string, error) { return "pc-q35-7.2", nil }}
}

func TestEFIPicksLikeLibvirt(t *testing.T) {
	usr := t.TempDir()
	writeFiles(t, usr, map[string]string{
		"40-edk2-x86_64-secure-enrolled.json": secureEnrolled,
		"50-edk2-x86_64-secure.json":          secureEmpty,
		"60-edk2-x86_64.json":                 plain,
	})
	r := resolver(usr)
	for _, tc := range []struct {
		secure         bool
		code, template string
	}{
		{false, "/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"},
		{true, "/usr/share/OVMF/OVMF_CODE_4M.ms.fd", "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"},
	} {
		fw, err := r.EFI(context.Background(), tc.secure)
		if err != nil || fw.Executable != tc.code || fw.NVRAMTemplate != tc.template {
			t.Errorf("secure boot %v: %+v, %v; want %s with %s", tc.secure, fw, err, tc.code, tc.template)
		}
	}

	// /etc overrides a file of the same name, an empty one there masks
	// it, dot files and directories are no descriptors, and the order is
	// by name across both directories.
	etc := t.TempDir()
	own := strings.ReplaceAll(plain, "/usr/share/OVMF/OVMF_VARS_4M.fd", "/etc/vars.fd")
	writeFiles(t, etc, map[string]string{
		"40-edk2-x86_64-secure-enrolled.json": "",
		"60-edk2-x86_64.json":                 own,
		".10-hidden.json":                     strings.ReplaceAll(plain, "/usr/share/OVMF/OVMF_VARS_4M.fd", "/hidden.fd"),
	})
	if err := os.Mkdir(filepath.Join(etc, "05-dir.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	r = resolver(usr, etc)
	if fw, err := r.EFI(context.Background(), false); err != nil || fw.NVRAMTemplate != "/etc/vars.fd" || fw.Descriptor != filepath.Join(etc, "60-edk2-x86_64.json") {
		t.Errorf("overridden: %+v, %v", fw, err)
	}
	if fw, err := r.EFI(context.Background(), true); err == nil {
		t.Errorf("masked secure-boot descriptor used: %+v", fw)
	} else if !strings.Contains(err.Error(), "secure-boot yes") {
		t.Errorf("error %v does not say what was asked", err)
	}
	writeFiles(t, etc, map[string]string{"55-first.json": strings.ReplaceAll(plain, "/usr/share/OVMF/OVMF_VARS_4M.fd", "/first.fd")})
	if fw, err := r.EFI(context.Background(), false); err != nil || fw.NVRAMTemplate != "/first.fd" {
		t.Errorf("order by name: %+v, %v", fw, err)
	}
}

func TestEFISkipsWhatDoesNotFit(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"10-bios.json":      strings.Replace(plain, `"uefi"`, `"bios"`, 1),
		"20-i440fx.json":    strings.Replace(plain, `"pc-i440fx-*", "pc-q35-*"`, `"pc-i440fx-*"`, 1),
		"30-aarch64.json":   strings.Replace(plain, `"x86_64"`, `"aarch64"`, 1),
		"40-stateless.json": strings.Replace(plain, `"device": "flash",`, `"device": "flash", "mode": "stateless",`, 1),
		"50-q35-6.json":     strings.Replace(plain, `"pc-i440fx-*", "pc-q35-*"`, `"pc-q35-6.?"`, 1),
		"90-plain.json":     plain,
	})
	fw, err := resolver(dir).EFI(context.Background(), false)
	if err != nil || fw.Descriptor != filepath.Join(dir, "90-plain.json") {
		t.Fatalf("%+v, %v; want 90-plain.json", fw, err)
	}
	// A glob with ? matches one character.
	writeFiles(t, dir, map[string]string{"60-q35-7.json": strings.Replace(plain, `"pc-i440fx-*", "pc-q35-*"`, `"pc-q35-7.?"`, 1)})
	if fw, err := resolver(dir).EFI(context.Background(), false); err != nil || fw.Descriptor != filepath.Join(dir, "60-q35-7.json") {
		t.Fatalf("%+v, %v; want 60-q35-7.json", fw, err)
	}
	writeFiles(t, dir, map[string]string{"01-broken.json": "{"})
	if _, err := resolver(dir).EFI(context.Background(), false); err == nil || !strings.Contains(err.Error(), "01-broken.json") {
		t.Fatalf("a broken descriptor: %v", err)
	}
	if _, err := resolver(t.TempDir(), filepath.Join(t.TempDir(), "none")).EFI(context.Background(), false); err == nil {
		t.Fatal("no descriptors: no error")
	}
}

func TestAliasOf(t *testing.T) {
	list := `Supported machines are:
pc                   Standard PC (i440FX + PIIX, 1996) (alias of pc-i440fx-7.2)
pc-i440fx-7.2        Standard PC (i440FX + PIIX, 1996) (default)
q35                  Standard PC (Q35 + ICH9, 2009) (alias of pc-q35-7.2)
pc-q35-7.2           Standard PC (Q35 + ICH9, 2009)
microvm              microvm (i386)
`
	for alias, want := range map[string]string{"q35": "pc-q35-7.2", "pc": "pc-i440fx-7.2", "microvm": "microvm"} {
		if got, err := aliasOf(list, alias); err != nil || got != want {
			t.Errorf("aliasOf(%s) = %q, %v; want %s", alias, got, err, want)
		}
	}
	if _, err := aliasOf(list, "virt"); err == nil {
		t.Error("an unknown machine type: no error")
	}
}

func TestGlobMatch(t *testing.T) {
	for _, tc := range []struct {
		pattern, s string
		want       bool
	}{
		{"pc-q35-*", "pc-q35-7.2", true},
		{"pc-q35-*", "pc-q35-", true},
		{"pc-q35-*", "pc-i440fx-7.2", false},
		{"pc-q35-?.2", "pc-q35-7.2", true},
		{"pc-q35-?.2", "pc-q35-10.2", false},
		{"*", "", true},
		{"pc-q35-[7].2", "pc-q35-7.2", false}, // no character classes
		{"*-7.2", "pc-q35-7.2", true},
	} {
		if got := globMatch(tc.pattern, tc.s); got != tc.want {
			t.Errorf("globMatch(%q, %q) = %v", tc.pattern, tc.s, got)
		}
	}
}
