package cloudinit

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"
	"unicode/utf16"
)

// A strict reader for the images the writer makes, written from ECMA-119,
// SUSP/RRIP 1.10 and the Joliet specification rather than from the writer,
// so that the tests compare two readings of the standards. It checks the
// invariants readers rely on (both-endian numbers agree, records stay in
// their sector, identifiers sorted, extents inside the volume) and
// returns what each kind of reader would see.

type parsedISO struct {
	label, jolietLabel string
	// Files by name as seen by a reader of the plain tree (identifiers
	// with ";1"), of Rock Ridge (NM names) and of Joliet (identifiers as recorded).
	plain, rockRidge, joliet map[string][]byte
	rrMode                   map[string]uint32
	extensions               []string // ER identifiers
	sectors                  int
}

type rawRecord struct {
	id        []byte
	lba, size uint32
	flags     byte
	date      []byte
	su        []byte
}

func le32be32(b []byte) (uint32, error) {
	le, be := binary.LittleEndian.Uint32(b), binary.BigEndian.Uint32(b[4:])
	if le != be {
		return 0, fmt.Errorf("both-endian number disagrees: %d vs %d", le, be)
	}
	return le, nil
}

func le16be16(b []byte) (uint16, error) {
	le, be := binary.LittleEndian.Uint16(b), binary.BigEndian.Uint16(b[2:])
	if le != be {
		return 0, fmt.Errorf("both-endian number disagrees: %d vs %d", le, be)
	}
	return le, nil
}

func parseISO(img []byte) (*parsedISO, error) {
	if len(img)%sectorSize != 0 || len(img) < 18*sectorSize {
		return nil, fmt.Errorf("image is %d bytes: not whole sectors or too small", len(img))
	}
	p := &parsedISO{
		plain: map[string][]byte{}, rockRidge: map[string][]byte{}, joliet: map[string][]byte{},
		rrMode: map[string]uint32{}, sectors: len(img) / sectorSize,
	}
	for i := range 16 * sectorSize {
		if img[i] != 0 {
			return nil, fmt.Errorf("system area byte %d is not zero", i)
		}
	}
	var pvd, svd []byte
	for lba := 16; ; lba++ {
		if lba >= p.sectors {
			return nil, fmt.Errorf("no volume descriptor set terminator")
		}
		d := img[lba*sectorSize : (lba+1)*sectorSize]
		if string(d[1:6]) != "CD001" || d[6] != 1 {
			return nil, fmt.Errorf("sector %d: not a volume descriptor", lba)
		}
		switch d[0] {
		case 1:
			pvd = d
		case 2:
			if esc := string(d[88:91]); esc == "%/@" || esc == "%/C" || esc == "%/E" {
				svd = d
			}
		case 255:
			goto done
		}
	}
done:
	if pvd == nil {
		return nil, fmt.Errorf("no primary volume descriptor")
	}
	if err := p.readTree(img, pvd, false); err != nil {
		return nil, fmt.Errorf("primary tree: %w", err)
	}
	if svd != nil {
		if err := p.readTree(img, svd, true); err != nil {
			return nil, fmt.Errorf("joliet tree: %w", err)
		}
	}
	return p, nil
}

func (p *parsedISO) readTree(img, vd []byte, joliet bool) error {
	total, err := le32be32(vd[80:])
	if err != nil {
		return err
	}
	if int(total) != p.sectors {
		return fmt.Errorf("volume space size %d, image has %d sectors", total, p.sectors)
	}
	if bs, err := le16be16(vd[128:]); err != nil || bs != sectorSize {
		return fmt.Errorf("logical block size %d (%v)", bs, err)
	}
	if vd[881] != 1 {
		return fmt.Errorf("file structure version %d", vd[881])
	}
	label := strings.TrimRight(string(vd[40:72]), " ")
	if joliet {
		label = decodeUCS2(vd[40:72])
		p.jolietLabel = strings.TrimRight(label, " ")
	} else {
		p.label = label
	}
	root, _, err := parseRecord(vd[156:190])
	if err != nil {
		return fmt.Errorf("root record: %w", err)
	}
	if err := checkPathTables(img, vd, root.lba); err != nil {
		return err
	}
	recs, err := readDirectory(img, root.lba, root.size)
	if err != nil {
		return err
	}
	if len(recs) < 2 || !bytes.Equal(recs[0].id, []byte{0}) || !bytes.Equal(recs[1].id, []byte{1}) {
		return fmt.Errorf("directory does not start with . and ..")
	}
	if recs[0].lba != root.lba || recs[0].size != root.size {
		return fmt.Errorf(`"." record does not match the root record`)
	}
	if !joliet {
		if err := p.readRootSUSP(img, recs[0].su); err != nil {
			return err
		}
	}
	files := recs[2:]
	for i := 1; i < len(files); i++ {
		if bytes.Compare(files[i-1].id, files[i].id) >= 0 {
			return fmt.Errorf("identifiers not sorted: %q before %q", files[i-1].id, files[i].id)
		}
	}
	for _, r := range files {
		if r.flags&2 != 0 {
			return fmt.Errorf("unexpected subdirectory %q", r.id)
		}
		end := int64(r.lba)*sectorSize + int64(r.size)
		if r.size > 0 && (r.lba < 16 || end > int64(len(img))) {
			return fmt.Errorf("extent of %q (sector %d, %d bytes) outside the volume", r.id, r.lba, r.size)
		}
		data := img[int64(r.lba)*sectorSize : end]
		if joliet {
			name := decodeUCS2(r.id) // as recorded: no ";1" expected
			p.joliet[name] = data
			continue
		}
		if err := checkLevel1(string(r.id)); err != nil {
			return err
		}
		p.plain[string(r.id)] = data
		entries, err := suspEntries(img, r.su)
		if err != nil {
			return fmt.Errorf("%q: %w", r.id, err)
		}
		if nm, ok := entries["NM"]; ok {
			if nm[0][0] != 0 {
				return fmt.Errorf("%q: NM flags %#x", r.id, nm[0][0])
			}
			p.rockRidge[string(nm[0][1:])] = data
			if px, ok := entries["PX"]; ok {
				mode, err := le32be32(px[0])
				if err != nil {
					return err
				}
				p.rrMode[string(nm[0][1:])] = mode
			}
		}
	}
	return nil
}

// readRootSUSP checks the root "." record: SP first, then (through CE)
// the ER entries naming the extensions.
func (p *parsedISO) readRootSUSP(img, su []byte) error {
	if len(su) == 0 {
		return nil // no SUSP: plain ISO 9660
	}
	if len(su) < 7 || string(su[:2]) != "SP" || su[2] != 7 || su[4] != 0xBE || su[5] != 0xEF || su[6] != 0 {
		return fmt.Errorf("root record does not start with a valid SP entry: % x", su[:min(7, len(su))])
	}
	entries, err := suspEntries(img, su)
	if err != nil {
		return err
	}
	for _, er := range entries["ER"] {
		lid, ldes, lsrc := int(er[0]), int(er[1]), int(er[2])
		if 4+lid+ldes+lsrc != len(er) {
			return fmt.Errorf("ER entry lengths do not add up")
		}
		p.extensions = append(p.extensions, string(er[4:4+lid]))
	}
	return nil
}

// suspEntries collects SUSP entries by signature (data after the 4-byte
// header), following CE continuation areas.
func suspEntries(img, su []byte) (map[string][][]byte, error) {
	out := map[string][][]byte{}
	for hops := 0; hops < 8; hops++ {
		var next []byte
		for len(su) >= 4 {
			n := int(su[2])
			if n < 4 || n > len(su) || su[3] != 1 {
				return nil, fmt.Errorf("bad SUSP entry % x", su[:4])
			}
			sig, data := string(su[:2]), su[4:n]
			out[sig] = append(out[sig], data)
			if sig == "CE" {
				lba, err1 := le32be32(data)
				off, err2 := le32be32(data[8:])
				size, err3 := le32be32(data[16:])
				if err1 != nil || err2 != nil || err3 != nil || off+size > sectorSize || int(lba+1)*sectorSize > len(img) {
					return nil, fmt.Errorf("bad CE entry")
				}
				next = img[int(lba)*sectorSize+int(off) : int(lba)*sectorSize+int(off+size)]
			}
			if sig == "ST" {
				break
			}
			su = su[n:]
		}
		if len(su) > 1 || (len(su) == 1 && su[0] != 0) {
			return nil, fmt.Errorf("trailing bytes in system use field: % x", su)
		}
		if next == nil {
			return out, nil
		}
		su = next
	}
	return nil, fmt.Errorf("CE loop")
}

func parseRecord(b []byte) (rawRecord, int, error) {
	n := int(b[0])
	if n < 34 || n > len(b) || n%2 == 1 {
		return rawRecord{}, 0, fmt.Errorf("bad record length %d", n)
	}
	var r rawRecord
	var err error
	if r.lba, err = le32be32(b[2:]); err != nil {
		return r, 0, err
	}
	if r.size, err = le32be32(b[10:]); err != nil {
		return r, 0, err
	}
	if seq, err := le16be16(b[28:]); err != nil || seq != 1 {
		return r, 0, fmt.Errorf("volume sequence number %d (%v)", seq, err)
	}
	r.date = b[18:25]
	r.flags = b[25]
	idLen := int(b[32])
	if 33+idLen > n {
		return r, 0, fmt.Errorf("identifier overruns record")
	}
	r.id = b[33 : 33+idLen]
	suStart := 33 + idLen
	if idLen%2 == 0 {
		suStart++
	}
	r.su = b[min(suStart, n):n]
	return r, n, nil
}

func readDirectory(img []byte, lba, size uint32) ([]rawRecord, error) {
	if size == 0 || size%sectorSize != 0 || int(lba)*sectorSize+int(size) > len(img) {
		return nil, fmt.Errorf("directory extent sector %d size %d", lba, size)
	}
	var recs []rawRecord
	for s := 0; s < int(size)/sectorSize; s++ {
		sec := img[(int(lba)+s)*sectorSize : (int(lba)+s+1)*sectorSize]
		for off := 0; off < sectorSize && sec[off] != 0; {
			r, n, err := parseRecord(sec[off:])
			if err != nil {
				return nil, fmt.Errorf("sector %d offset %d: %w", int(lba)+s, off, err)
			}
			recs = append(recs, r)
			off += n
		}
	}
	return recs, nil
}

func checkPathTables(img, vd []byte, rootLBA uint32) error {
	size, err := le32be32(vd[132:])
	if err != nil || size != 10 {
		return fmt.Errorf("path table size %d (%v), want 10 for a lone root", size, err)
	}
	for _, t := range []struct {
		lba   uint32
		order binary.ByteOrder
	}{
		{binary.LittleEndian.Uint32(vd[140:]), binary.LittleEndian},
		{binary.BigEndian.Uint32(vd[148:]), binary.BigEndian},
	} {
		e := img[int(t.lba)*sectorSize:]
		if e[0] != 1 || e[8] != 0 || t.order.Uint32(e[2:]) != rootLBA || t.order.Uint16(e[6:]) != 1 {
			return fmt.Errorf("path table at sector %d does not describe the root at %d: % x", t.lba, rootLBA, e[:10])
		}
	}
	return nil
}

// checkLevel1 enforces ISO 9660 level 1 identifiers: 8.3 d-characters and
// ";1".
func checkLevel1(id string) error {
	name, ok := strings.CutSuffix(id, ";1")
	base, ext, dot := strings.Cut(name, ".")
	if !ok || !dot || len(base) == 0 || len(base) > 8 || len(ext) > 3 {
		return fmt.Errorf("identifier %q is not level 1", id)
	}
	for _, c := range base + ext {
		if !(c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return fmt.Errorf("identifier %q has a non-d-character %q", id, c)
		}
	}
	return nil
}

func decodeUCS2(b []byte) string {
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = binary.BigEndian.Uint16(b[2*i:])
	}
	return string(utf16.Decode(u))
}
