// Package cpio writes cpio archives in the "newc" (SVR4, no CRC) format,
// the only format the Linux kernel unpacks as an initramfs.
//
// The writer is deliberately small: it writes what an initramfs needs
// (directories, regular files, symlinks, device nodes) with the fields the
// caller gives, so the output is byte-for-byte reproducible.
package cpio

import (
	"errors"
	"fmt"
	"io"
	"strings"
)

// File types for Header.Mode, as in <sys/stat.h>.
const (
	TypeDir     = 0o040000
	TypeReg     = 0o100000
	TypeSymlink = 0o120000
	TypeChar    = 0o020000
	TypeBlock   = 0o060000

	// TypeMask selects the file type bits of a mode.
	TypeMask = 0o170000
)

const (
	magic       = "070701"
	headerLen   = 110
	trailerName = "TRAILER!!!"
)

// Header describes one archive entry. Name is the path inside the archive,
// without a leading slash (the kernel accepts both; cpio tools expect none).
type Header struct {
	Name  string
	Mode  uint32 // file type bits | permission bits
	UID   uint32
	GID   uint32
	Mtime uint32
	// Size is the length of the data that follows: the file content, or
	// for a symlink the target (use Writer.WriteSymlink).
	Size int64
	// RDevMajor/RDevMinor are the device numbers of a device node.
	RDevMajor uint32
	RDevMinor uint32
}

// Writer writes a newc archive. Call WriteHeader then write exactly Size
// bytes, for each entry; Close writes the trailer.
type Writer struct {
	w         io.Writer
	ino       uint32
	remaining int64 // data bytes still owed for the current entry
	pad       int64 // padding owed after the current entry's data
	closed    bool
}

// NewWriter returns a Writer that writes to w. It does not close w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteHeader starts a new entry.
func (cw *Writer) WriteHeader(h *Header) error {
	if cw.closed {
		return errors.New("cpio: write after close")
	}
	if err := cw.finishEntry(); err != nil {
		return err
	}
	name := strings.TrimPrefix(h.Name, "/")
	if name == "" || strings.ContainsRune(name, 0) {
		return fmt.Errorf("cpio: invalid name %q", h.Name)
	}
	if h.Mode&TypeMask == 0 {
		return fmt.Errorf("cpio: %s: mode %o has no file type", name, h.Mode)
	}
	if h.Size < 0 || h.Size > 0xffffffff {
		return fmt.Errorf("cpio: %s: size %d out of range for newc", name, h.Size)
	}
	if h.Size != 0 && h.Mode&TypeMask != TypeReg && h.Mode&TypeMask != TypeSymlink {
		return fmt.Errorf("cpio: %s: only regular files and symlinks carry data", name)
	}
	nlink := uint32(1)
	if h.Mode&TypeMask == TypeDir {
		nlink = 2
	}
	// Inode numbers only need to be unique: the kernel uses (ino, dev)
	// together with nlink>1 to detect hard links, and we write none.
	cw.ino++
	return cw.writeRaw(name, cw.ino, h.Mode, h.UID, h.GID, nlink, h.Mtime, h.Size, h.RDevMajor, h.RDevMinor)
}

func (cw *Writer) writeRaw(name string, ino, mode, uid, gid, nlink, mtime uint32, size int64, rmaj, rmin uint32) error {
	namesize := len(name) + 1 // includes the NUL
	hdr := fmt.Sprintf("%s%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		magic, ino, mode, uid, gid, nlink, mtime, uint32(size),
		0, 0, rmaj, rmin, namesize, 0)
	buf := make([]byte, 0, headerLen+namesize+3)
	buf = append(buf, hdr...)
	buf = append(buf, name...)
	buf = append(buf, 0)
	// Header plus name is padded to a multiple of 4.
	for len(buf)%4 != 0 {
		buf = append(buf, 0)
	}
	if _, err := cw.w.Write(buf); err != nil {
		return fmt.Errorf("cpio: %w", err)
	}
	cw.remaining = size
	cw.pad = (4 - size%4) % 4
	return nil
}

// Write writes data for the current entry.
func (cw *Writer) Write(p []byte) (int, error) {
	if int64(len(p)) > cw.remaining {
		return 0, fmt.Errorf("cpio: write of %d bytes exceeds the %d left in the entry", len(p), cw.remaining)
	}
	n, err := cw.w.Write(p)
	cw.remaining -= int64(n)
	if err != nil {
		return n, fmt.Errorf("cpio: %w", err)
	}
	return n, nil
}

// WriteSymlink writes a whole symlink entry.
func (cw *Writer) WriteSymlink(name, target string, mtime uint32) error {
	if err := cw.WriteHeader(&Header{Name: name, Mode: TypeSymlink | 0o777, Mtime: mtime, Size: int64(len(target))}); err != nil {
		return err
	}
	_, err := io.WriteString(cw, target)
	return err
}

func (cw *Writer) finishEntry() error {
	if cw.remaining != 0 {
		return fmt.Errorf("cpio: entry is %d bytes short", cw.remaining)
	}
	if cw.pad > 0 {
		if _, err := cw.w.Write(make([]byte, cw.pad)); err != nil {
			return fmt.Errorf("cpio: %w", err)
		}
		cw.pad = 0
	}
	return nil
}

// Close writes the trailer entry. The kernel does not need the archive to
// be padded to 512 bytes, so none is added.
func (cw *Writer) Close() error {
	if cw.closed {
		return nil
	}
	if err := cw.finishEntry(); err != nil {
		return err
	}
	cw.closed = true
	return cw.writeRaw(trailerName, 0, 0, 0, 0, 1, 0, 0, 0, 0)
}
