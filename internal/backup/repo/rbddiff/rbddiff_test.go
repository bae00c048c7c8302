package rbddiff

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
)

type rec struct {
	tag      byte
	name     string
	size     uint64
	off, len uint64
	data     string
}

func write(t testing.TB, recs []rec) []byte {
	var b bytes.Buffer
	w := NewWriter(&b)
	for _, r := range recs {
		var err error
		switch r.tag {
		case TagFromSnap:
			err = w.FromSnap(r.name)
		case TagToSnap:
			err = w.ToSnap(r.name)
		case TagSize:
			err = w.Size(r.size)
		case TagWrite:
			err = w.Write(r.off, []byte(r.data))
		case TagZero:
			err = w.Zero(r.off, r.len)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := w.End(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func readAll(data []byte) ([]rec, error) {
	d, err := NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	var out []rec
	for {
		r, err := d.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		x := rec{tag: r.Tag, name: r.Name, size: r.Size, off: r.Offset, len: r.Length}
		if r.Tag == TagWrite {
			b, err := io.ReadAll(r.Data)
			if err != nil {
				return out, err
			}
			x.data = string(b)
			x.len = 0
		}
		if r.Tag == TagZero {
			x.len = r.Length
		}
		out = append(out, x)
	}
}

func TestRoundTrip(t *testing.T) {
	recs := []rec{
		{tag: TagFromSnap, name: "snap-1"},
		{tag: TagToSnap, name: "snap-2"},
		{tag: TagSize, size: 1 << 20},
		{tag: TagWrite, off: 0, data: "hello"},
		{tag: TagZero, off: 5, len: 100},
		{tag: TagWrite, off: 4096, data: strings.Repeat("x", 70000)},
		{tag: TagZero, off: 1<<20 - 10, len: 10},
	}
	data := write(t, recs)
	if !bytes.HasPrefix(data, []byte("rbd diff v1\n")) || data[len(data)-1] != 'e' {
		t.Fatalf("stream %q... does not start with the header or end with 'e'", data[:20])
	}
	got, err := readAll(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(recs) {
		t.Fatalf("read %d records, wrote %d", len(got), len(recs))
	}
	for i := range recs {
		if got[i] != recs[i] {
			t.Errorf("record %d = %+v, want %+v", i, got[i], recs[i])
		}
	}
}

// An unread 'w' record's data is skipped by the next Next.
func TestNextSkipsUnreadData(t *testing.T) {
	data := write(t, []rec{{tag: TagSize, size: 100}, {tag: TagWrite, off: 0, data: "abcdef"}, {tag: TagWrite, off: 10, data: "gh"}})
	d, err := NewReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	d.Next() // size
	d.Next() // 'w' abcdef, unread
	r, err := d.Next()
	if err != nil || r.Offset != 10 {
		t.Fatalf("Next = %+v, %v", r, err)
	}
	if b, _ := io.ReadAll(r.Data); string(b) != "gh" {
		t.Errorf("data %q", b)
	}
}

func TestReaderRefusesBadStreams(t *testing.T) {
	le64 := func(v uint64) string { return string(binary.LittleEndian.AppendUint64(nil, v)) }
	le32 := func(v uint32) string { return string(binary.LittleEndian.AppendUint32(nil, v)) }
	for name, s := range map[string]string{
		"empty":                 "",
		"wrong header":          "rbd diff v2\n",
		"no end":                Header + "s" + le64(10),
		"unknown tag":           Header + "s" + le64(10) + "q",
		"data before size":      Header + "w" + le64(0) + le64(1) + "x" + "e",
		"write beyond size":     Header + "s" + le64(10) + "w" + le64(8) + le64(4) + "abcd" + "e",
		"offset overflow":       Header + "s" + le64(10) + "z" + le64(1<<63) + le64(1<<63) + "e",
		"empty record":          Header + "s" + le64(10) + "z" + le64(0) + le64(0) + "e",
		"overlap":               Header + "s" + le64(10) + "z" + le64(0) + le64(5) + "z" + le64(4) + le64(2) + "e",
		"out of order":          Header + "s" + le64(10) + "z" + le64(5) + le64(1) + "z" + le64(0) + le64(1) + "e",
		"truncated data":        Header + "s" + le64(10) + "w" + le64(0) + le64(4) + "ab",
		"size after data":       Header + "s" + le64(10) + "z" + le64(0) + le64(1) + "s" + le64(10) + "e",
		"snap after data":       Header + "s" + le64(10) + "z" + le64(0) + le64(1) + "t" + le32(1) + "x" + "e",
		"empty snap name":       Header + "f" + le32(0) + "e",
		"huge snap name":        Header + "f" + le32(1<<31) + "e",
		"truncated snap name":   Header + "f" + le32(10) + "abc",
		"huge size":             Header + "s" + le64(1<<62) + "e",
		"truncated size record": Header + "s" + le64(10)[:3],
	} {
		t.Run(name, func(t *testing.T) {
			_, err := readAll([]byte(s))
			if !errors.Is(err, ErrFormat) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("error %v, want ErrFormat", err)
			}
		})
	}
}

// FuzzReader: whatever a target or a process gives, the reader returns
// records within the declared size, in order, or an error; it never
// panics, and what it accepts writes back to the same bytes.
func FuzzReader(f *testing.F) {
	f.Add(write(f, []rec{{tag: TagFromSnap, name: "a"}, {tag: TagSize, size: 100}, {tag: TagWrite, off: 1, data: "xy"}, {tag: TagZero, off: 50, len: 50}}))
	f.Add(write(f, []rec{{tag: TagSize, size: 0}}))
	f.Add([]byte(Header + "e"))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := readAll(data)
		if err != nil {
			return
		}
		var size uint64
		var next uint64
		for _, r := range recs {
			switch r.tag {
			case TagSize:
				size = r.size
			case TagWrite, TagZero:
				n := r.len
				if r.tag == TagWrite {
					n = uint64(len(r.data))
				}
				if r.off < next || r.off+n > size || n == 0 {
					t.Fatalf("record %+v out of order or beyond size %d", r, size)
				}
				next = r.off + n
			}
		}
		again := write(t, recs)
		if !bytes.HasPrefix(data, again) {
			t.Fatalf("accepted %q, which writes back as %q", data, again)
		}
	})
}
