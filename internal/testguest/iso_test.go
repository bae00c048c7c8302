package testguest_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"sort"
	"strings"
)

// writeISO writes a minimal ISO 9660 image (one root directory, no Rock
// Ridge or Joliet) holding files, with volume label label: just enough for
// a cidata disk, and no ISO tool needed on the test host. Linux shows the
// names lower-cased, so "USER-DATA" reads back as user-data.
func writeISO(path, label string, files map[string]string) error {
	const sector = 2048
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, strings.ToUpper(n))
	}
	sort.Strings(names)

	// Layout: 16 system sectors, PVD (16), terminator (17), L and M path
	// tables (18, 19), root directory (20), then one extent per file.
	const rootLBA = 20
	fileLBA := map[string]uint32{}
	next := uint32(rootLBA + 1)
	for _, n := range names {
		fileLBA[n] = next
		next += uint32((len(files[strings.ToLower(n)]) + sector - 1) / sector)
		if len(files[strings.ToLower(n)]) == 0 {
			next++
		}
	}
	total := next

	both32 := func(b []byte, v uint32) {
		binary.LittleEndian.PutUint32(b, v)
		binary.BigEndian.PutUint32(b[4:], v)
	}
	both16 := func(b []byte, v uint16) {
		binary.LittleEndian.PutUint16(b, v)
		binary.BigEndian.PutUint16(b[2:], v)
	}
	dirRecord := func(name []byte, lba, size uint32, dir bool) []byte {
		n := 33 + len(name)
		if n%2 == 1 {
			n++
		}
		r := make([]byte, n)
		r[0] = byte(n)
		both32(r[2:], lba)
		both32(r[10:], size)
		r[18], r[19], r[20] = 126, 1, 1 // 2026-01-01, any date does
		if dir {
			r[25] = 2
		}
		both16(r[28:], 1)
		r[32] = byte(len(name))
		copy(r[33:], name)
		return r
	}
	padded := func(s string, n int) []byte {
		return []byte((s + strings.Repeat(" ", n))[:n])
	}

	img := make([]byte, int(total)*sector)
	pvd := img[16*sector:]
	pvd[0] = 1
	copy(pvd[1:], "CD001")
	pvd[6] = 1
	copy(pvd[8:], padded("LINUX", 32))
	copy(pvd[40:], padded(label, 32))
	both32(pvd[80:], total)
	both16(pvd[120:], 1)
	both16(pvd[124:], 1)
	both16(pvd[128:], sector)
	both32(pvd[132:], 10) // path table size: the root entry
	binary.LittleEndian.PutUint32(pvd[140:], 18)
	binary.BigEndian.PutUint32(pvd[148:], 19)
	copy(pvd[156:], dirRecord([]byte{0}, rootLBA, sector, true))
	copy(pvd[190:], bytes.Repeat([]byte(" "), 623)) // volume set id .. bibliographic ids
	for _, off := range []int{813, 830, 847, 864} { // dates: "not specified"
		copy(pvd[off:], strings.Repeat("0", 16))
	}
	pvd[881] = 1

	term := img[17*sector:]
	term[0] = 255
	copy(term[1:], "CD001")
	term[6] = 1

	// Path tables: the root only (name length 1, name 0, parent 1).
	lpt := img[18*sector:]
	lpt[0] = 1
	binary.LittleEndian.PutUint32(lpt[2:], rootLBA)
	binary.LittleEndian.PutUint16(lpt[6:], 1)
	mpt := img[19*sector:]
	mpt[0] = 1
	binary.BigEndian.PutUint32(mpt[2:], rootLBA)
	binary.BigEndian.PutUint16(mpt[6:], 1)

	root := img[rootLBA*sector : (rootLBA+1)*sector]
	off := 0
	for _, r := range [][]byte{
		dirRecord([]byte{0}, rootLBA, sector, true),
		dirRecord([]byte{1}, rootLBA, sector, true),
	} {
		off += copy(root[off:], r)
	}
	for _, n := range names {
		data := files[strings.ToLower(n)]
		off += copy(root[off:], dirRecord([]byte(n+";1"), fileLBA[n], uint32(len(data)), false))
		copy(img[int(fileLBA[n])*sector:], data)
	}
	return os.WriteFile(path, img, 0o644)
}
