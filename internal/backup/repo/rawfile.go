package repo

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// RawFile is a raw image (a file or a block device) as a RawSource: a
// file's holes are found with SEEK_DATA/SEEK_HOLE and never read.
type RawFile struct {
	f    *os.File
	size int64
}

var _ RawSource = (*RawFile)(nil)

// OpenRawFile opens a raw image for WriteRaw.
func OpenRawFile(path string) (*RawFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	// Seek to the end is the size of a file and of a block device alike.
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("size of %s: %w", path, err)
	}
	return &RawFile{f: f, size: size}, nil
}

func (r *RawFile) ReadAt(p []byte, off int64) (int, error) { return r.f.ReadAt(p, off) }

// Size is the image's size when it was opened.
func (r *RawFile) Size() int64 { return r.size }

// Close closes the file.
func (r *RawFile) Close() error { return r.f.Close() }

// DataRanges are the file's data extents by SEEK_DATA and SEEK_HOLE;
// nil (all data) where the filesystem or device does not tell.
func (r *RawFile) DataRanges() ([]Range, error) {
	fd := int(r.f.Fd())
	var ranges []Range
	var off int64
	for off < r.size {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // no data after off
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("seek data at %d: %w", off, err)
		}
		if data >= r.size {
			break
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return nil, fmt.Errorf("seek hole at %d: %w", data, err)
		}
		hole = min(hole, r.size)
		if hole <= data {
			return nil, nil // a filesystem that answers nonsense: read it all
		}
		ranges = append(ranges, Range{Offset: data, Length: hole - data})
		off = hole
	}
	if ranges == nil {
		ranges = []Range{} // all holes: no data, which nil would not say
	}
	return ranges, nil
}
