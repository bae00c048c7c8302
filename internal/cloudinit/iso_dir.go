package cloudinit

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sort"
)

const sectorSize = 2048

// dirRecord is one directory record (ECMA-119 9.1).
type dirRecord struct {
	id        []byte // file identifier: 0x00 for ".", 0x01 for ".."
	lba, size uint32
	dir       bool
	date      []byte // 7-byte recording date
	su        []byte // system use field (Rock Ridge entries)
}

func (r dirRecord) encode() ([]byte, error) {
	n := 33 + len(r.id)
	if n%2 == 1 {
		n++ // padding byte after an even-length identifier
	}
	n += len(r.su)
	if n%2 == 1 {
		n++ // records have even length; readers stop at the zero
	}
	if n > 255 {
		return nil, fmt.Errorf("directory record for %q is %d bytes, more than 255", r.id, n)
	}
	b := make([]byte, n)
	b[0] = byte(n)
	putBoth32(b[2:], r.lba)
	putBoth32(b[10:], r.size)
	copy(b[18:25], r.date)
	if r.dir {
		b[25] = 2
	}
	putBoth16(b[28:], 1) // volume sequence number
	b[32] = byte(len(r.id))
	copy(b[33:], r.id)
	copy(b[33+len(r.id)+(1-len(r.id)%2):], r.su)
	return b, nil
}

// sortRecords orders file records by identifier as 9.3 asks. Comparing
// the bytes is that order here: level 1 identifiers hold only d-characters,
// which all sort after '.' and ';', and Joliet's UCS-2 big-endian bytes
// sort like its code points.
func sortRecords(recs []dirRecord) {
	sort.Slice(recs, func(i, j int) bool { return bytes.Compare(recs[i].id, recs[j].id) < 0 })
}

// packDirectory lays records out in whole sectors; a record must not
// cross a sector boundary (6.8.1.1), so one that does not fit starts the
// next sector.
func packDirectory(recs []dirRecord) ([]byte, error) {
	var out []byte
	used := 0
	for _, r := range recs {
		b, err := r.encode()
		if err != nil {
			return nil, err
		}
		if used+len(b) > sectorSize {
			out = append(out, make([]byte, sectorSize-used)...)
			used = 0
		}
		out = append(out, b...)
		used += len(b)
	}
	if used > 0 {
		out = append(out, make([]byte, sectorSize-used)...)
	}
	return out, nil
}

// pathTable is the path table of a tree with only a root directory
// (9.4): one 10-byte entry, in little-endian (L) or big-endian (M) order.
func pathTable(rootLBA uint32, order binary.ByteOrder) []byte {
	b := make([]byte, 10)
	b[0] = 1 // identifier length; the root's identifier is 0x00
	order.PutUint32(b[2:], rootLBA)
	order.PutUint16(b[6:], 1) // parent: the root itself
	return b
}
