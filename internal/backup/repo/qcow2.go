package repo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
)

// maxMapBytes bounds `qemu-img map`'s output: a badly fragmented image
// of many terabytes has a few million extents.
const maxMapBytes = 512 << 20

// QCOW2File is a qcow2 image as a RawSource, without converting it: its
// guest-visible bytes are read straight from the file where `qemu-img
// map` says each extent lies, and its unallocated and zero extents are
// holes. It takes what virtplane's local volumes and their snapshot
// copies are: standalone (no backing file) and uncompressed; an extent
// from a backing file or a compressed cluster is refused when the image
// is opened. The image must not change while it is read (a snapshot
// copy, or the volume of a stopped VM).
type QCOW2File struct {
	f       *os.File
	size    int64
	extents []mapExtent
}

var _ RawSource = (*QCOW2File)(nil)

// mapExtent is one entry of `qemu-img map --output=json`.
type mapExtent struct {
	Start  int64  `json:"start"`
	Length int64  `json:"length"`
	Depth  int    `json:"depth"`
	Zero   bool   `json:"zero"`
	Data   bool   `json:"data"`
	Offset *int64 `json:"offset"`
}

// OpenQCOW2 maps a qcow2 image with `qemu-img map --output=json -f
// qcow2` (the format is given, never probed) and opens it for reading.
func OpenQCOW2(ctx context.Context, path string) (*QCOW2File, error) {
	cmd := exec.CommandContext(ctx, "qemu-img", "map", "--output=json", "-f", "qcow2", path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("qemu-img map %s: %w", path, err)
	}
	var extents []mapExtent
	derr := json.NewDecoder(io.LimitReader(out, maxMapBytes)).Decode(&extents)
	_, _ = io.Copy(io.Discard, out)
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("qemu-img map %s: %w: %s", path, err, bytes.TrimSpace(stderr.Bytes()))
	}
	if derr != nil {
		return nil, fmt.Errorf("qemu-img map %s: %w", path, derr)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	q := &QCOW2File{f: f, extents: extents}
	if err := q.check(fi.Size()); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return q, nil
}

// check holds the map to what reading relies on: extents in order, each
// following the one before, data of this file only and within it.
func (q *QCOW2File) check(fileSize int64) error {
	var at int64
	for i, e := range q.extents {
		switch {
		case e.Start != at || e.Length <= 0:
			return fmt.Errorf("qemu-img map: extent %d [%d, +%d) does not follow the one before (at %d)", i, e.Start, e.Length, at)
		case e.Zero:
		case e.Depth != 0:
			return fmt.Errorf("extent [%d, +%d) comes from a backing file: only standalone images are read", e.Start, e.Length)
		case !e.Data:
			return fmt.Errorf("extent [%d, +%d) is neither data nor zero", e.Start, e.Length)
		case e.Offset == nil:
			return fmt.Errorf("extent [%d, +%d) is compressed (or not in the file): convert the image first", e.Start, e.Length)
		case *e.Offset < 0 || *e.Offset > fileSize || e.Length > fileSize-*e.Offset:
			return fmt.Errorf("extent [%d, +%d) lies at %d, beyond the file's %d bytes", e.Start, e.Length, *e.Offset, fileSize)
		}
		at = e.Start + e.Length
	}
	if at <= 0 {
		return errors.New("qemu-img map: no extents")
	}
	q.size = at
	return nil
}

// Size is the image's virtual size.
func (q *QCOW2File) Size() int64 { return q.size }

// Close closes the file.
func (q *QCOW2File) Close() error { return q.f.Close() }

// DataRanges are the extents that hold data (merged when adjacent).
func (q *QCOW2File) DataRanges() ([]Range, error) {
	ranges := []Range{}
	for _, e := range q.extents {
		if e.Zero {
			continue
		}
		if n := len(ranges); n > 0 && ranges[n-1].Offset+ranges[n-1].Length == e.Start {
			ranges[n-1].Length += e.Length
			continue
		}
		ranges = append(ranges, Range{Offset: e.Start, Length: e.Length})
	}
	return ranges, nil
}

// ReadAt reads the guest's bytes at off: zeros for zero extents, the
// file's bytes where the map puts data.
func (q *QCOW2File) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("negative offset")
	}
	n := 0
	for n < len(p) && off < q.size {
		i := sort.Search(len(q.extents), func(i int) bool { return q.extents[i].Start+q.extents[i].Length > off })
		e := q.extents[i]
		m := int(min(int64(len(p)-n), e.Start+e.Length-off))
		if e.Zero {
			clear(p[n : n+m])
		} else if _, err := q.f.ReadAt(p[n:n+m], *e.Offset+off-e.Start); err != nil {
			return n, err
		}
		n += m
		off += int64(m)
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}
