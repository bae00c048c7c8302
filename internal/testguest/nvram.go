package testguest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf16"
)

// EFI variable stores: OVMF keeps a guest's variables (boot entries,
// Secure Boot keys) in its NVRAM file, an edk2 firmware volume holding an
// authenticated variable store. Tests read it to tell whose variables a
// guest booted with: OVMF counts boots in the variable MTC (monotonic
// counter), 1 after the first boot from the template, n after the n-th
// boot from the same store (docs/notes/storage-probes-efi.md, appendix).

// EFIVariable is one live variable of a store.
type EFIVariable struct {
	Name string
	Data []byte
}

// ErrNoVariable: the store has no live variable of that name.
var ErrNoVariable = errors.New("no such EFI variable")

// authVarStoreGUID is gEfiAuthenticatedVariableGuid as stored (the
// mixed-endian byte order of an EFI_GUID): the store OVMF builds.
var authVarStoreGUID = []byte{0x78, 0x2c, 0xf3, 0xaa, 0x7b, 0x94, 0x9a, 0x43, 0xa1, 0x80, 0x2e, 0x14, 0x4e, 0xc3, 0x77, 0x92}

const (
	fvSignatureOffset = 0x28 // "_FVH"
	fvHeaderLenOffset = 0x30 // u16
	storeHeaderLen    = 28   // GUID, u32 size, u8 format, u8 state, 6 reserved
	varHeaderLen      = 60   // an AUTHENTICATED_VARIABLE_HEADER
	varStartID        = 0x55AA
	varAdded          = 0x3F
	varInDeleted      = 0x3E // added, being replaced: still the live copy
)

// EFIVariables reads the live variables of an OVMF variable store (an
// NVRAM file, or an image's export), in store order.
func EFIVariables(store []byte) ([]EFIVariable, error) {
	if len(store) < fvHeaderLenOffset+2 || string(store[fvSignatureOffset:fvSignatureOffset+4]) != "_FVH" {
		return nil, errors.New("not an EFI firmware volume (no _FVH signature)")
	}
	start := int(binary.LittleEndian.Uint16(store[fvHeaderLenOffset:]))
	if start+storeHeaderLen > len(store) {
		return nil, fmt.Errorf("firmware volume header of %d bytes runs past the %d-byte store", start, len(store))
	}
	if !bytes.Equal(store[start:start+16], authVarStoreGUID) {
		return nil, errors.New("not an authenticated variable store")
	}
	end := start + int(binary.LittleEndian.Uint32(store[start+16:]))
	if end > len(store) || end < start+storeHeaderLen {
		return nil, fmt.Errorf("variable store size runs past the %d-byte file", len(store))
	}
	var vars []EFIVariable
	for off := start + storeHeaderLen; off+varHeaderLen <= end; {
		h := store[off : off+varHeaderLen]
		if binary.LittleEndian.Uint16(h) != varStartID {
			break // the free space after the last variable
		}
		state := h[2]
		nameSize := int(binary.LittleEndian.Uint32(h[36:]))
		dataSize := int(binary.LittleEndian.Uint32(h[40:]))
		body := off + varHeaderLen
		if nameSize < 0 || dataSize < 0 || nameSize > end-body || dataSize > end-body-nameSize {
			return nil, fmt.Errorf("variable at offset %d runs past the store", off)
		}
		if state == varAdded || state == varInDeleted {
			vars = append(vars, EFIVariable{
				Name: utf16Name(store[body : body+nameSize]),
				Data: bytes.Clone(store[body+nameSize : body+nameSize+dataSize]),
			})
		}
		off = (body + nameSize + dataSize + 3) &^ 3
	}
	return vars, nil
}

// utf16Name decodes a NUL-terminated UTF-16LE name.
func utf16Name(b []byte) string {
	u := make([]uint16, 0, len(b)/2)
	for i := 0; i+1 < len(b); i += 2 {
		c := binary.LittleEndian.Uint16(b[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}

// BootCount is OVMF's MTC variable in store: how many times the firmware
// booted from this store. ErrNoVariable for a store OVMF never booted
// from (a VARS template).
func BootCount(store []byte) (uint32, error) {
	vars, err := EFIVariables(store)
	if err != nil {
		return 0, err
	}
	// A variable being replaced (0x3E) and its replacement (0x3F) can
	// both be in the store for a moment: the last one is the newest.
	var found *EFIVariable
	for i := range vars {
		if vars[i].Name == "MTC" {
			found = &vars[i]
		}
	}
	switch {
	case found == nil:
		return 0, ErrNoVariable
	case len(found.Data) != 4:
		return 0, fmt.Errorf("MTC holds %d bytes, want 4", len(found.Data))
	}
	return binary.LittleEndian.Uint32(found.Data), nil
}
