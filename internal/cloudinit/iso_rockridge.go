package cloudinit

import "time"

// Rock Ridge (RRIP 1.10, "RRIP_1991A") rides on the System Use Sharing
// Protocol (SUSP 1.10): entries of the form sig[2] len version data in the
// system use field at the end of each directory record of the primary
// tree. Linux's isofs uses the Rock Ridge names (NM) whenever the root
// directory's "." record carries an SP entry and an ER entry names the
// extension; it then ignores Joliet.

// Rock Ridge's extension reference, word for word as RRIP 1.10 asks (and
// as genisoimage and xorriso write it).
const (
	rripID         = "RRIP_1991A"
	rripDescriptor = "THE ROCK RIDGE INTERCHANGE PROTOCOL PROVIDES SUPPORT FOR POSIX FILE SYSTEM SEMANTICS"
	rripSource     = "PLEASE CONTACT DISC PUBLISHER FOR SPECIFICATION SOURCE.  SEE PUBLISHER IDENTIFIER IN PRIMARY VOLUME DESCRIPTOR FOR CONTACT INFORMATION."
)

// POSIX modes for PX entries: the seed is read-only media, so r-x for the
// directory and r-- for the files, for everyone (cloud-init runs as root,
// but nothing in it is meant to be hidden from the guest's other users
// more than the device node already is).
const (
	modeDir  = 0o040555
	modeFile = 0o100444
)

func suspEntry(sig string, data ...[]byte) []byte {
	n := 4
	for _, d := range data {
		n += len(d)
	}
	e := make([]byte, 0, n)
	e = append(e, sig[0], sig[1], byte(n), 1)
	for _, d := range data {
		e = append(e, d...)
	}
	return e
}

// spEntry marks the start of SUSP use; it must be the first entry of the
// root directory's "." record. 0xBE 0xEF is its check pattern; skip 0
// means the system use fields hold nothing before the SUSP entries.
func spEntry() []byte { return suspEntry("SP", []byte{0xBE, 0xEF, 0}) }

// ceEntry points at a continuation area: the ER entry (237 bytes) does
// not fit in a directory record (255 bytes at most, 34 of them taken).
func ceEntry(lba, offset, length uint32) []byte {
	return suspEntry("CE", both32(lba), both32(offset), both32(length))
}

// erEntry names the extension in use.
func erEntry() []byte {
	return suspEntry("ER",
		[]byte{byte(len(rripID)), byte(len(rripDescriptor)), byte(len(rripSource)), 1},
		[]byte(rripID), []byte(rripDescriptor), []byte(rripSource))
}

// pxEntry gives POSIX attributes: mode, links, uid, gid (the 36-byte
// RRIP 1.10 form, without the serial number 1.12 added).
func pxEntry(mode, links uint32) []byte {
	return suspEntry("PX", both32(mode), both32(links), both32(0), both32(0))
}

// tfEntry records modification, access and attribute-change times in the
// short 7-byte form; all three are the seed's time.
func tfEntry(t time.Time) []byte {
	const modify, access, attributes = 1 << 1, 1 << 2, 1 << 3
	d := recordDate(t)
	return suspEntry("TF", []byte{modify | access | attributes}, d, d, d)
}

// nmEntry holds the POSIX file name, the reason Rock Ridge is here at
// all: "meta-data" is not a legal ISO 9660 name.
func nmEntry(name string) []byte {
	return suspEntry("NM", []byte{0}, []byte(name))
}
