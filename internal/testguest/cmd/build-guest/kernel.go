package main

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os/exec"
)

// Under TCG the kernel's own decompressor is slow: unpacking Debian's
// xz-compressed bzImage takes ~5 s of a ~10 s boot. QEMU can instead load
// the uncompressed ELF kernel through its PVH entry point (CONFIG_PVH=y),
// which halves the boot. extractVmlinux gets that ELF out of the bzImage.

var errNoPVH = errors.New("kernel has no PVH entry point")

// bzImage setup header fields (Documentation/arch/x86/boot.rst).
const (
	offSetupSects    = 0x1f1
	offHeaderMagic   = 0x202
	offPayloadOffset = 0x248
	offPayloadLength = 0x24c
)

// extractVmlinux returns the uncompressed ELF kernel inside a bzImage,
// after checking that QEMU can boot it directly (PVH ELF note).
func extractVmlinux(bz []byte) ([]byte, error) {
	if len(bz) < 0x250 || string(bz[offHeaderMagic:offHeaderMagic+4]) != "HdrS" {
		return nil, errors.New("not a bzImage")
	}
	setup := int(bz[offSetupSects])
	if setup == 0 {
		setup = 4
	}
	start := (setup+1)*512 + int(binary.LittleEndian.Uint32(bz[offPayloadOffset:]))
	n := int(binary.LittleEndian.Uint32(bz[offPayloadLength:]))
	if n < 4 || start+n > len(bz) {
		return nil, fmt.Errorf("bzImage payload %d+%d out of range", start, n)
	}
	payload := bz[start : start+n]
	// The build appends the uncompressed size, little-endian, to the
	// compressed stream.
	want := int(binary.LittleEndian.Uint32(payload[n-4:]))
	var out []byte
	var err error
	switch {
	case bytes.HasPrefix(payload, []byte("\xfd7zXZ\x00")):
		out, err = unxz(payload)
	case bytes.HasPrefix(payload, []byte{0x1f, 0x8b}):
		out, err = gunzip(payload)
	default:
		return nil, fmt.Errorf("bzImage payload compression %x is not supported (xz and gzip are)", payload[:4])
	}
	if err != nil {
		return nil, err
	}
	if len(out) != want {
		return nil, fmt.Errorf("decompressed kernel is %d bytes, the bzImage says %d", len(out), want)
	}
	if err := checkPVH(out); err != nil {
		return nil, err
	}
	return out, nil
}

func unxz(data []byte) ([]byte, error) {
	// --single-stream: the size trailer follows the xz stream.
	cmd := exec.Command("xz", "--decompress", "--stdout", "--single-stream")
	cmd.Stdin = bytes.NewReader(data)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("xz: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return stdout.Bytes(), nil
}

func gunzip(data []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("gunzip kernel: %w", err)
	}
	zr.Multistream(false)
	out, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("gunzip kernel: %w", err)
	}
	return out, nil
}

// checkPVH looks for the Xen ELF note XEN_ELFNOTE_PHYS32_ENTRY (18), which
// QEMU's -kernel needs to boot an ELF image on x86.
func checkPVH(img []byte) error {
	f, err := elf.NewFile(bytes.NewReader(img))
	if err != nil {
		return fmt.Errorf("decompressed kernel: %w", err)
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		notes, err := io.ReadAll(p.Open())
		if err != nil {
			return fmt.Errorf("kernel notes: %w", err)
		}
		for len(notes) >= 12 {
			namesz := int(binary.LittleEndian.Uint32(notes[0:]))
			descsz := int(binary.LittleEndian.Uint32(notes[4:]))
			typ := binary.LittleEndian.Uint32(notes[8:])
			name := 12 + align4(namesz)
			end := name + align4(descsz)
			if end > len(notes) {
				break
			}
			if string(bytes.TrimRight(notes[12:12+namesz], "\x00")) == "Xen" && typ == 18 {
				return nil
			}
			notes = notes[end:]
		}
	}
	return errNoPVH
}

func align4(n int) int { return (n + 3) &^ 3 }
