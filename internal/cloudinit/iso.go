package cloudinit

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"time"
)

// This file writes a small ISO 9660 image: one root directory of regular
// files, with Rock Ridge names in the primary tree and a Joliet tree
// beside it. That is what `genisoimage -J -R` makes of a NoCloud seed, and
// what cloud-init's documentation suggests. Every byte follows from the
// inputs (no clocks, no map order), so equal seeds give equal images.
//
// Layout, in 2048-byte sectors:
//
//	0-15  system area (zero)
//	16    primary volume descriptor
//	17    Joliet supplementary volume descriptor
//	18    volume descriptor set terminator
//	19-20 primary L and M path tables
//	21-22 Joliet L and M path tables
//	23    primary root directory (more sectors if it needs them)
//	24    Joliet root directory
//	25    Rock Ridge continuation area (the ER entry)
//	26-   file data, then zeros up to minSectors
//
// Without Joliet or Rock Ridge (only tests turn them off) their sectors
// are left out.

// minSectors is the smallest image written (see place).
const minSectors = 64

// isoFile is one file of the root directory.
type isoFile struct {
	name string
	data []byte
}

type isoOptions struct {
	volumeID string
	modTime  time.Time
	// Tests turn the extensions off one at a time to prove that each on
	// its own gives the right names.
	noRockRidge, noJoliet bool
}

// isoLayout holds the sector numbers of everything in the image.
type isoLayout struct {
	svd, term, lpt, mpt, jlpt, jmpt, ce uint32
	root, rootSize                      uint32 // size in bytes
	jroot, jrootSize                    uint32
	files                               []uint32
	total                               uint32 // sectors
}

func writeISO(w io.Writer, files []isoFile, opt isoOptions) error {
	img, err := buildISO(files, opt)
	if err != nil {
		return err
	}
	if _, err := w.Write(img); err != nil {
		return fmt.Errorf("write ISO image: %w", err)
	}
	return nil
}

func buildISO(files []isoFile, opt isoOptions) ([]byte, error) {
	if err := checkISOInput(files, opt); err != nil {
		return nil, err
	}
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.name
	}
	isoIDs := level1Names(names)

	// Directory sizes do not depend on where things go, so measure them
	// with an empty layout first, then place everything.
	var l isoLayout
	l.files = make([]uint32, len(files))
	rootDir, err := packDirectory(primaryRecords(files, isoIDs, &l, opt))
	if err != nil {
		return nil, err
	}
	var jolietDir []byte
	if !opt.noJoliet {
		if jolietDir, err = packDirectory(jolietRecords(files, &l, opt)); err != nil {
			return nil, err
		}
	}
	place(&l, files, len(rootDir), len(jolietDir), opt)

	img := make([]byte, int(l.total)*sectorSize)
	at := func(lba uint32) []byte { return img[int(lba)*sectorSize:] }

	if rootDir, err = packDirectory(primaryRecords(files, isoIDs, &l, opt)); err != nil {
		return nil, err
	}
	copy(at(l.root), rootDir)
	copy(at(16), volumeDescriptor(1, l, l.root, l.rootSize, l.lpt, l.mpt, opt))
	copy(at(l.lpt), pathTable(l.root, binary.LittleEndian))
	copy(at(l.mpt), pathTable(l.root, binary.BigEndian))
	if !opt.noJoliet {
		if jolietDir, err = packDirectory(jolietRecords(files, &l, opt)); err != nil {
			return nil, err
		}
		copy(at(l.jroot), jolietDir)
		copy(at(l.svd), volumeDescriptor(2, l, l.jroot, l.jrootSize, l.jlpt, l.jmpt, opt))
		copy(at(l.jlpt), pathTable(l.jroot, binary.LittleEndian))
		copy(at(l.jmpt), pathTable(l.jroot, binary.BigEndian))
	}
	if !opt.noRockRidge {
		copy(at(l.ce), erEntry())
	}
	term := at(l.term)
	term[0] = 255
	copy(term[1:], "CD001")
	term[6] = 1
	for i, f := range files {
		copy(at(l.files[i]), f.data)
	}
	return img, nil
}

func checkISOInput(files []isoFile, opt isoOptions) error {
	if opt.volumeID == "" || len(opt.volumeID) > 16 {
		// 16: the Joliet volume identifier holds 16 UCS-2 characters, and
		// blkid takes the label from it.
		return fmt.Errorf("volume identifier %q must be 1 to 16 characters", opt.volumeID)
	}
	if err := checkDate(opt.modTime); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, f := range files {
		if err := checkFileName(f.name); err != nil {
			return err
		}
		if seen[f.name] {
			return fmt.Errorf("duplicate file name %q", f.name)
		}
		seen[f.name] = true
		if int64(len(f.data)) > math.MaxUint32 {
			return fmt.Errorf("file %q is larger than 4 GiB, the most one ISO 9660 extent holds", f.name)
		}
	}
	return nil
}

// place assigns sectors (see the layout at the top of the file).
func place(l *isoLayout, files []isoFile, rootBytes, jolietBytes int, opt isoOptions) {
	next := uint32(17)
	take := func(n uint32) uint32 { lba := next; next += n; return lba }
	if !opt.noJoliet {
		l.svd = take(1)
	}
	l.term = take(1)
	l.lpt, l.mpt = take(1), take(1)
	if !opt.noJoliet {
		l.jlpt, l.jmpt = take(1), take(1)
	}
	l.rootSize = uint32(rootBytes)
	l.root = take(l.rootSize / sectorSize)
	if !opt.noJoliet {
		l.jrootSize = uint32(jolietBytes)
		l.jroot = take(l.jrootSize / sectorSize)
	}
	// After the directories: libarchive reads an image front to back and
	// rejects a continuation area before the record that points to it.
	if !opt.noRockRidge {
		l.ce = take(1)
	}
	for i, f := range files {
		// An empty file has no extent; location 0 is what other writers
		// record for it too.
		if len(f.data) > 0 {
			l.files[i] = take(uint32((len(f.data) + sectorSize - 1) / sectorSize))
		}
	}
	// Zero padding up to a minimum: libburn (xorriso) takes an image of
	// 32 sectors or fewer for blank media. 128 KiB costs nothing.
	l.total = max(next, minSectors)
}

// primaryRecords is the root directory of the primary tree: ".", "..",
// then the files by level 1 identifier, with Rock Ridge entries.
func primaryRecords(files []isoFile, isoIDs []string, l *isoLayout, opt isoOptions) []dirRecord {
	date := recordDate(opt.modTime)
	rr := !opt.noRockRidge
	dot := dirRecord{id: []byte{0}, lba: l.root, size: l.rootSize, dir: true, date: date}
	dotdot := dirRecord{id: []byte{1}, lba: l.root, size: l.rootSize, dir: true, date: date}
	if rr {
		tf := tfEntry(opt.modTime)
		er := erEntry()
		dot.su = concat(spEntry(), ceEntry(l.ce, 0, uint32(len(er))), pxEntry(modeDir, 2), tf)
		dotdot.su = concat(pxEntry(modeDir, 2), tf)
	}
	var recs []dirRecord
	for i, f := range files {
		r := dirRecord{id: []byte(isoIDs[i]), lba: l.files[i], size: uint32(len(f.data)), date: date}
		if rr {
			r.su = concat(pxEntry(modeFile, 1), tfEntry(opt.modTime), nmEntry(f.name))
		}
		recs = append(recs, r)
	}
	sortRecords(recs)
	return append([]dirRecord{dot, dotdot}, recs...)
}

// jolietRecords is the root directory of the Joliet tree: the same files
// under their UCS-2 names, no system use entries.
func jolietRecords(files []isoFile, l *isoLayout, opt isoOptions) []dirRecord {
	date := recordDate(opt.modTime)
	var recs []dirRecord
	for i, f := range files {
		recs = append(recs, dirRecord{id: jolietName(f.name), lba: l.files[i], size: uint32(len(f.data)), date: date})
	}
	sortRecords(recs)
	return append([]dirRecord{
		{id: []byte{0}, lba: l.jroot, size: l.jrootSize, dir: true, date: date},
		{id: []byte{1}, lba: l.jroot, size: l.jrootSize, dir: true, date: date},
	}, recs...)
}

// volumeDescriptor is the primary (typ 1) or Joliet supplementary (typ 2)
// volume descriptor (ECMA-119 8.4 and 8.5). They differ in the character
// set of their identifiers and in where their root directory is.
func volumeDescriptor(typ byte, l isoLayout, root, rootSize, lpt, mpt uint32, opt isoOptions) []byte {
	d := make([]byte, sectorSize)
	d[0] = typ
	copy(d[1:], "CD001")
	d[6] = 1
	fill := fillASCII
	if typ == 2 {
		fill = fillUCS2
		copy(d[88:], "%/E") // escape sequence for UCS-2 level 3
	}
	fill(d[8:40], "LINUX")         // system identifier
	fill(d[40:72], opt.volumeID)   // volume identifier: the label
	putBoth32(d[80:], l.total)     // volume space size
	putBoth16(d[120:], 1)          // volume set size
	putBoth16(d[124:], 1)          // volume sequence number
	putBoth16(d[128:], sectorSize) // logical block size
	putBoth32(d[132:], 10)         // path table size: the root's entry
	binary.LittleEndian.PutUint32(d[140:], lpt)
	binary.BigEndian.PutUint32(d[148:], mpt)
	rootRec, _ := dirRecord{id: []byte{0}, lba: root, size: rootSize, dir: true, date: recordDate(opt.modTime)}.encode()
	copy(d[156:190], rootRec)
	fill(d[190:318], "")          // volume set identifier
	fill(d[318:446], "")          // publisher
	fill(d[446:574], "")          // data preparer
	fill(d[574:702], "VIRTPLANE") // application
	fill(d[702:739], "")          // copyright file
	fill(d[739:776], "")          // abstract file
	fill(d[776:813], "")          // bibliographic file
	copy(d[813:], volumeDate(opt.modTime))
	copy(d[830:], volumeDate(opt.modTime))
	copy(d[847:], unspecifiedDate()) // expiration
	copy(d[864:], unspecifiedDate()) // effective
	d[881] = 1                       // file structure version
	return d
}

func concat(parts ...[]byte) []byte {
	var b []byte
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}
