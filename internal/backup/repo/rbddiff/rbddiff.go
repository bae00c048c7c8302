// Package rbddiff reads and writes RBD's export-diff format v1
// (doc/dev/rbd-diff.rst in ceph/ceph): what `rbd export-diff` prints and
// `rbd import-diff` reads.
//
//	header  "rbd diff v1\n"
//	'f'     le32 length, name: the snapshot the diff starts from
//	't'     le32 length, name: the snapshot it ends at
//	's'     le64: the image's size at the end
//	'w'     le64 offset, le64 length, length bytes: data
//	'z'     le64 offset, le64 length: zeros
//	'e'     the end
//
// What it reads comes from a backup target or from a process: the Reader
// checks every bound (names, the order of records, offsets within the
// size, data records after the size) and never allocates what a length
// field says before the bytes are there.
package rbddiff

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Header starts every export-diff v1 stream.
const Header = "rbd diff v1\n"

// Record tags.
const (
	TagFromSnap = 'f'
	TagToSnap   = 't'
	TagSize     = 's'
	TagWrite    = 'w'
	TagZero     = 'z'
	TagEnd      = 'e'
)

// MaxSnapName bounds a snapshot name (Ceph's own names are far shorter).
const MaxSnapName = 4096

// MaxImageSize bounds the size record: 2^60 bytes (an exbibyte), far
// above any real image, so that offset+length never overflows.
const MaxImageSize = 1 << 60

// ErrFormat is a stream that is not a valid export-diff v1.
var ErrFormat = errors.New("invalid rbd export-diff stream")

// Record is one record of a stream. For a 'w' record, Data reads its
// Length bytes; the next call to Next skips what is left unread.
type Record struct {
	Tag    byte
	Name   string // 'f', 't'
	Size   uint64 // 's'
	Offset uint64 // 'w', 'z'
	Length uint64 // 'w', 'z'
	Data   io.Reader
}

// Reader reads a stream record by record.
type Reader struct {
	r       *bufio.Reader
	data    *io.LimitedReader // the unread rest of the last 'w' record
	size    uint64
	hasSize bool
	inData  bool   // a 'w' or 'z' record was read: no more metadata
	next    uint64 // data records are in order: the next may not start before
	ended   bool
}

// NewReader reads the header of a stream.
func NewReader(r io.Reader) (*Reader, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	h := make([]byte, len(Header))
	if _, err := io.ReadFull(br, h); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrFormat, unexpected(err))
	}
	if string(h) != Header {
		return nil, fmt.Errorf("%w: header %q is not %q", ErrFormat, h, Header)
	}
	return &Reader{r: br}, nil
}

// Size is the image size the stream declared, and whether it has.
func (d *Reader) Size() (uint64, bool) { return d.size, d.hasSize }

// Next is the next record; io.EOF after the end record. A stream that
// ends before its end record is io.ErrUnexpectedEOF. Data records must
// come after the size record, in increasing order without overlap, and
// within the size: rbd writes them so, and the repository merges them
// onto chunks in one pass.
func (d *Reader) Next() (Record, error) {
	if d.ended {
		return Record{}, io.EOF
	}
	if d.data != nil {
		if _, err := io.Copy(io.Discard, d.data); err != nil {
			return Record{}, err
		}
		if d.data.N > 0 {
			return Record{}, fmt.Errorf("%w: data record: %v", ErrFormat, io.ErrUnexpectedEOF)
		}
		d.data = nil
	}
	tag, err := d.r.ReadByte()
	if err != nil {
		return Record{}, fmt.Errorf("%w: before the end record: %v", ErrFormat, unexpected(err))
	}
	switch tag {
	case TagFromSnap, TagToSnap:
		if d.inData {
			return Record{}, fmt.Errorf("%w: snapshot record %q after data records", ErrFormat, tag)
		}
		n, err := d.u32()
		if err != nil {
			return Record{}, err
		}
		if n == 0 || n > MaxSnapName {
			return Record{}, fmt.Errorf("%w: snapshot name of %d bytes (1 to %d)", ErrFormat, n, MaxSnapName)
		}
		b := make([]byte, n)
		if _, err := io.ReadFull(d.r, b); err != nil {
			return Record{}, fmt.Errorf("%w: snapshot name: %v", ErrFormat, unexpected(err))
		}
		return Record{Tag: tag, Name: string(b)}, nil
	case TagSize:
		if d.inData {
			return Record{}, fmt.Errorf("%w: size record after data records", ErrFormat)
		}
		s, err := d.u64()
		if err != nil {
			return Record{}, err
		}
		if s > MaxImageSize {
			return Record{}, fmt.Errorf("%w: image size %d above %d", ErrFormat, s, uint64(MaxImageSize))
		}
		d.size, d.hasSize = s, true
		return Record{Tag: tag, Size: s}, nil
	case TagWrite, TagZero:
		if !d.hasSize {
			return Record{}, fmt.Errorf("%w: data record before the size record", ErrFormat)
		}
		d.inData = true
		off, err := d.u64()
		if err != nil {
			return Record{}, err
		}
		n, err := d.u64()
		if err != nil {
			return Record{}, err
		}
		switch {
		case n == 0:
			return Record{}, fmt.Errorf("%w: empty data record at %d", ErrFormat, off)
		case off > d.size || n > d.size-off:
			return Record{}, fmt.Errorf("%w: data record [%d, +%d) beyond the image size %d", ErrFormat, off, n, d.size)
		case off < d.next:
			return Record{}, fmt.Errorf("%w: data record at %d overlaps or precedes the one before, which ends at %d", ErrFormat, off, d.next)
		}
		d.next = off + n
		rec := Record{Tag: tag, Offset: off, Length: n}
		if tag == TagWrite {
			d.data = &io.LimitedReader{R: d.r, N: int64(n)}
			rec.Data = d.data
		}
		return rec, nil
	case TagEnd:
		d.ended = true
		return Record{}, io.EOF
	default:
		return Record{}, fmt.Errorf("%w: unknown record tag %q", ErrFormat, tag)
	}
}

func (d *Reader) u32() (uint32, error) {
	var b [4]byte
	if _, err := io.ReadFull(d.r, b[:]); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrFormat, unexpected(err))
	}
	return binary.LittleEndian.Uint32(b[:]), nil
}

func (d *Reader) u64() (uint64, error) {
	var b [8]byte
	if _, err := io.ReadFull(d.r, b[:]); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrFormat, unexpected(err))
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Writer writes a stream: metadata records (FromSnap, ToSnap, Size)
// first, then data records, then End.
type Writer struct {
	w   *bufio.Writer
	err error
}

// NewWriter writes the header to w. Nothing is flushed before End (or
// an error): what it writes is buffered.
func NewWriter(w io.Writer) *Writer {
	bw := bufio.NewWriterSize(w, 64<<10)
	_, err := bw.WriteString(Header)
	return &Writer{w: bw, err: err}
}

func (w *Writer) name(tag byte, name string) error {
	if len(name) == 0 || len(name) > MaxSnapName {
		return fmt.Errorf("snapshot name of %d bytes (1 to %d)", len(name), MaxSnapName)
	}
	w.put(tag)
	w.put32(uint32(len(name)))
	if w.err == nil {
		_, w.err = w.w.WriteString(name)
	}
	return w.err
}

// FromSnap writes the 'f' record.
func (w *Writer) FromSnap(name string) error { return w.name(TagFromSnap, name) }

// ToSnap writes the 't' record: import-diff makes that snapshot at the
// end.
func (w *Writer) ToSnap(name string) error { return w.name(TagToSnap, name) }

// Size writes the 's' record.
func (w *Writer) Size(size uint64) error {
	w.put(TagSize)
	w.put64(size)
	return w.err
}

// Write writes a 'w' record of data at off.
func (w *Writer) Write(off uint64, data []byte) error {
	if len(data) == 0 {
		return nil
	}
	w.put(TagWrite)
	w.put64(off)
	w.put64(uint64(len(data)))
	if w.err == nil {
		_, w.err = w.w.Write(data)
	}
	return w.err
}

// Zero writes a 'z' record.
func (w *Writer) Zero(off, length uint64) error {
	if length == 0 {
		return nil
	}
	w.put(TagZero)
	w.put64(off)
	w.put64(length)
	return w.err
}

// End writes the 'e' record and flushes.
func (w *Writer) End() error {
	w.put(TagEnd)
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}

// Flush sends what is buffered (without an end record).
func (w *Writer) Flush() error {
	if w.err == nil {
		w.err = w.w.Flush()
	}
	return w.err
}

func (w *Writer) put(b byte) {
	if w.err == nil {
		w.err = w.w.WriteByte(b)
	}
}

func (w *Writer) put32(v uint32) {
	if w.err == nil {
		_, w.err = w.w.Write(binary.LittleEndian.AppendUint32(nil, v))
	}
}

func (w *Writer) put64(v uint64) {
	if w.err == nil {
		_, w.err = w.w.Write(binary.LittleEndian.AppendUint64(nil, v))
	}
}
