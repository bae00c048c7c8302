package repo

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The holes of a sparse file are found (SEEK_DATA/SEEK_HOLE), never
// read, and recorded as zero chunks; so are all-zero chunks that were
// written.
func TestSparseFileChunking(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const cs = MinChunkSize
	path := filepath.Join(dir, "sparse.raw")
	size := int64(20*cs + 123)
	data := []Range{{Offset: 0, Length: 4096}, {Offset: 5*cs - 4096, Length: 8192}, {Offset: 20 * cs, Length: 123}}
	sparseVolume(t, path, size, data, 7)
	// Chunk 10: written, but zeros.
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, cs), 10*cs); err != nil {
		t.Fatal(err)
	}
	f.Close()

	src, err := OpenRawFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ranges, err := src.DataRanges()
	if err != nil {
		t.Fatal(err)
	}
	// Filesystems report data in blocks of their own (ext4: 4 KiB).
	want := []Range{{0, 4096}, {5*cs - 4096, 8192}, {10 * cs, cs}, {20 * cs, 123}}
	if !slices.Equal(ranges, want) {
		t.Logf("data ranges %v (this filesystem's granularity), the written ones %v", ranges, want)
	}
	hasData, err := chunksWithData(ranges, size, cs, 21)
	if err != nil {
		t.Fatal(err)
	}
	var withData []int
	for i, h := range hasData {
		if h {
			withData = append(withData, i)
		}
	}
	if !slices.Equal(withData, []int{0, 4, 5, 10, 20}) {
		t.Errorf("chunks with data %v, want [0 4 5 10 20]", withData)
	}

	r := New(mustDir(t), Options{ChunkSize: cs, Concurrency: 3})
	v, st, err := r.WriteRaw(ctx, src, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.ChunksTotal != 21 || st.ZeroChunks != 17 || st.ChunksUploaded != 4 || st.BytesRead != 4*cs+123 {
		t.Errorf("stats %+v: want 21 chunks, 17 zero (16 holes, 1 written zeros), 4 uploaded, %d bytes read", st, 4*cs+123)
	}
	for i, c := range v.Chunks {
		if (c != "") != slices.Contains([]int{0, 4, 5, 20}, i) {
			t.Errorf("chunk %d = %q", i, c)
		}
	}
	out := make(bufAt, size)
	if err := r.RestoreRaw(ctx, v, out, nil); err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(path)
	if !slices.Equal([]byte(out), orig) {
		t.Error("restore differs")
	}

	// A file with no data at all: every chunk a zero chunk, nothing read.
	empty := filepath.Join(dir, "empty.raw")
	sparseVolume(t, empty, 3*cs, nil, 0)
	src2, err := OpenRawFile(empty)
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Close()
	_, st, err = r.WriteRaw(ctx, src2, nil, nil)
	if err != nil || st.ZeroChunks != 3 || st.BytesRead != 0 {
		t.Errorf("an all-hole file: %+v, %v; want 3 zero chunks, nothing read", st, err)
	}
}

// Two chunks with the same bytes in one volume, and the same bytes in a
// second volume: stored once.
func TestDedupAcrossChunksAndVolumes(t *testing.T) {
	ctx := context.Background()
	const cs = MinChunkSize
	dir := t.TempDir()
	block := make([]byte, cs)
	rng := rand.New(rand.NewPCG(9, 9))
	for i := range block {
		block[i] = byte(rng.Uint32())
	}
	write := func(name string, at ...int64) *RawFile {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Truncate(8 * cs)
		for _, o := range at {
			f.WriteAt(block, o*cs)
		}
		f.Close()
		src, err := OpenRawFile(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		return src
	}
	r := New(mustDir(t), Options{ChunkSize: cs, Concurrency: 4})
	_, st, err := r.WriteRaw(ctx, write("a", 0, 3, 7), nil, nil)
	if err != nil || st.ChunksUploaded != 1 || st.ChunksReused != 2 {
		t.Errorf("one volume, one block thrice: %+v, %v; want 1 uploaded, 2 reused", st, err)
	}
	_, st, err = r.WriteRaw(ctx, write("b", 5), nil, nil)
	if err != nil || st.ChunksUploaded != 0 || st.ChunksReused != 1 || st.BytesWritten != 0 {
		t.Errorf("another volume with the block, no base: %+v, %v; want it found in the store", st, err)
	}
}

func mustDir(t *testing.T) Store {
	t.Helper()
	s, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}
