// Package imagefill writes raw disk images whose bytes are really there,
// for tests and benchmarks that must pay what copying an image costs: a
// sparse or zero-filled image is skipped by qemu-img (holes, zero
// detection) and would make a copy look as cheap as a clone.
package imagefill

import (
	"encoding/binary"
	"fmt"
	"os"
)

// chunk is what one write puts down.
const chunk = 4 << 20

// Write makes a raw image of size bytes at path (0644; it must not
// exist) whose first data bytes are written with a pattern that no tool
// takes for zeros or for a repeated block (every 4 KiB block carries its
// offset), the rest a hole. data is rounded down to 4 KiB and capped at
// size. On error the file is removed.
func Write(path string, size, data int64) (err error) {
	if size <= 0 || data < 0 {
		return fmt.Errorf("imagefill: size %d, data %d: want a positive size and no negative data", size, data)
	}
	data = min(data, size) &^ 4095
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("imagefill: %w", err)
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = os.Remove(path)
		}
	}()
	buf := make([]byte, chunk)
	for i := range buf {
		buf[i] = byte(i%251) | 1
	}
	for off := int64(0); off < data; off += chunk {
		n := min(chunk, data-off)
		for b := int64(0); b < n; b += 4096 {
			binary.LittleEndian.PutUint64(buf[b:], uint64(off+b))
		}
		if _, err := f.Write(buf[:n]); err != nil {
			return fmt.Errorf("imagefill: writing %s: %w", path, err)
		}
	}
	if err := f.Truncate(size); err != nil {
		return fmt.Errorf("imagefill: %w", err)
	}
	return nil
}
