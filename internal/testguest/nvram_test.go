package testguest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

const (
	ovmfCode   = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	ovmfVars   = "/usr/share/OVMF/OVMF_VARS_4M.fd"
	ovmfVarsMS = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"
)

func readOrSkip(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("%s: not installed (Debian package ovmf)", path)
	}
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Debian's VARS templates: the plain one is empty; the one with
// Microsoft's keys holds the Secure Boot variables, and an MTC of 1: it
// was made by booting OVMF once to enroll them (its store also holds
// variables deleted and replaced on the way, which are skipped).
func TestEFIVariablesOfTheTemplates(t *testing.T) {
	vars, err := EFIVariables(readOrSkip(t, ovmfVars))
	if err != nil || len(vars) != 0 {
		t.Fatalf("empty template: %d variables, %v", len(vars), err)
	}
	ms := readOrSkip(t, ovmfVarsMS)
	vars, err = EFIVariables(ms)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, v := range vars {
		names = append(names, v.Name)
	}
	for _, want := range []string{"PK", "KEK", "db", "dbx", "SecureBootEnable"} {
		if !slices.Contains(names, want) {
			t.Errorf("enrolled template lacks %s: %v", want, names)
		}
	}
	if n, err := BootCount(ms); err != nil || n != 1 {
		t.Errorf("BootCount of the enrolled template = %d, %v; want 1", n, err)
	}
	if _, err := BootCount(readOrSkip(t, ovmfVars)); !errors.Is(err, ErrNoVariable) {
		t.Errorf("BootCount of the empty template = %v, want ErrNoVariable", err)
	}
}

func TestEFIVariablesRefusesWhatIsNoStore(t *testing.T) {
	store := readOrSkip(t, ovmfVars)
	broken := bytes.Clone(store)
	hdr := int(binary.LittleEndian.Uint16(store[fvHeaderLenOffset:]))
	// A variable whose name claims more than the store holds.
	off := hdr + storeHeaderLen
	binary.LittleEndian.PutUint16(broken[off:], varStartID)
	broken[off+2] = varAdded
	binary.LittleEndian.PutUint32(broken[off+36:], 1<<31)
	for name, b := range map[string][]byte{
		"empty":             nil,
		"not a volume":      make([]byte, 4096),
		"truncated":         store[:hdr+10],
		"variable too long": broken,
	} {
		if _, err := EFIVariables(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// OVMF counts its boots in MTC: a store booted once from the template
// says 1, and 2 after a second boot from the same file. The firmware is
// Debian's OVMF under QEMU (TCG), with no disk: it writes its variables
// on its way to the boot manager.
func TestBootCountOfABootedStore(t *testing.T) {
	readOrSkip(t, ovmfCode)
	tmpl := readOrSkip(t, ovmfVars)
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		t.Skip("qemu-system-x86_64 not installed")
	}
	store := filepath.Join(t.TempDir(), "vars.fd")
	if err := os.WriteFile(store, tmpl, 0o600); err != nil {
		t.Fatal(err)
	}
	for boot := uint32(1); boot <= 2; boot++ {
		got := bootOVMF(t, qemu, store, boot)
		t.Logf("boot %d: MTC %d", boot, got)
	}
}

// bootOVMF runs OVMF on store until its MTC says want, and kills it.
func bootOVMF(t *testing.T, qemu, store string, want uint32) uint32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, "-machine", "q35,accel=tcg", "-m", "128", "-nodefaults", "-display", "none",
		"-serial", "none", "-no-reboot",
		"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+ovmfCode,
		"-drive", "if=pflash,format=raw,unit=1,file="+store)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("QEMU ended before MTC reached %d: %v (last read: %v)", want, err, last)
		case <-ctx.Done():
			t.Fatalf("MTC did not reach %d: %v", want, last)
		case <-tick.C:
		}
		b, err := os.ReadFile(store)
		if err != nil {
			t.Fatal(err)
		}
		n, err := BootCount(b)
		switch {
		case err == nil && n == want:
			return n
		case err == nil && n > want:
			t.Fatalf("MTC = %d, want %d", n, want)
		}
		last = err
	}
}
