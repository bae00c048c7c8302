package cloudinit

import (
	"encoding/binary"
	"fmt"
	"time"
	"unicode/utf16"
)

// ISO 9660 (ECMA-119) stores most numbers twice, little- then big-endian
// ("both-byte order", 7.2.3 and 7.3.3), so that either kind of machine
// reads them without swapping.

func putBoth16(b []byte, v uint16) {
	binary.LittleEndian.PutUint16(b, v)
	binary.BigEndian.PutUint16(b[2:], v)
}

func putBoth32(b []byte, v uint32) {
	binary.LittleEndian.PutUint32(b, v)
	binary.BigEndian.PutUint32(b[4:], v)
}

func both32(v uint32) []byte {
	b := make([]byte, 8)
	putBoth32(b, v)
	return b
}

// Dates must fit both encodings: directory records count years from 1900
// in one byte, so 1900..2155.
func checkDate(t time.Time) error {
	if y := t.UTC().Year(); y < 1900 || y > 2155 {
		return fmt.Errorf("time %s outside the years ISO 9660 directory records can hold (1900-2155)", t.UTC().Format(time.RFC3339))
	}
	return nil
}

// recordDate is the 7-byte date of directory records (9.1.5) and of Rock
// Ridge TF entries. Always UTC, offset 0, so the bytes do not depend on the
// writer's time zone.
func recordDate(t time.Time) []byte {
	t = t.UTC()
	return []byte{
		byte(t.Year() - 1900), byte(t.Month()), byte(t.Day()),
		byte(t.Hour()), byte(t.Minute()), byte(t.Second()),
		0, // offset from GMT in 15-minute units
	}
}

// volumeDate is the 17-byte date of volume descriptors (8.4.26.1):
// "YYYYMMDDHHMMSScc" in ASCII digits plus the GMT offset byte.
func volumeDate(t time.Time) []byte {
	t = t.UTC()
	s := fmt.Sprintf("%04d%02d%02d%02d%02d%02d%02d", t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond()/1e7)
	return append([]byte(s), 0)
}

// unspecifiedDate is how a volume descriptor says "no date": sixteen '0'
// digits and a zero offset.
func unspecifiedDate() []byte {
	return append([]byte("0000000000000000"), 0)
}

// fillASCII writes s into dst padded with spaces, as the a- and d-character
// fields of the primary volume descriptor want.
func fillASCII(dst []byte, s string) {
	n := copy(dst, s)
	for i := n; i < len(dst); i++ {
		dst[i] = ' '
	}
}

// ucs2 encodes s as big-endian UCS-2, Joliet's character set. Characters
// outside the BMP come out as surrogate pairs (UTF-16); Joliet names here
// are ASCII anyway.
func ucs2(s string) []byte {
	u := utf16.Encode([]rune(s))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		binary.BigEndian.PutUint16(b[2*i:], c)
	}
	return b
}

// fillUCS2 writes s into dst in UCS-2 padded with UCS-2 spaces (0x0020);
// an odd trailing byte stays zero.
func fillUCS2(dst []byte, s string) {
	n := copy(dst, ucs2(s))
	n += n % 2
	for i := n; i+1 < len(dst); i += 2 {
		dst[i], dst[i+1] = 0, ' '
	}
}
