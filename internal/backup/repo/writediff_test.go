package repo

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo/rbddiff"
)

// op is a data record of a diff: data at off, or n zeros when data is nil.
type op struct {
	off  int64
	n    int64
	data bool
}

// diffOf is the export-diff that takes model to its new state by ops (in
// order), with the given snapshots and size, and applies the ops to
// model.
func diffOf(t *testing.T, model *[]byte, from, to string, size int64, ops []op, rng *rand.Rand) []byte {
	t.Helper()
	var b bytes.Buffer
	w := rbddiff.NewWriter(&b)
	if from != "" {
		w.FromSnap(from)
	}
	if to != "" {
		w.ToSnap(to)
	}
	w.Size(uint64(size))
	m := *model
	if int64(len(m)) > size {
		m = m[:size]
	} else {
		m = append(m, make([]byte, size-int64(len(m)))...)
	}
	for _, o := range ops {
		if o.data {
			d := make([]byte, o.n)
			for i := range d {
				d[i] = byte(rng.Uint32()) | 1
			}
			copy(m[o.off:], d)
			w.Write(uint64(o.off), d)
		} else {
			clear(m[o.off : o.off+o.n])
			w.Zero(uint64(o.off), uint64(o.n))
		}
	}
	if err := w.End(); err != nil {
		t.Fatal(err)
	}
	*model = m
	return b.Bytes()
}

// applyDiff is what rbd import-diff does, onto an empty image.
func applyDiff(t *testing.T, stream []byte) []byte {
	t.Helper()
	d, err := rbddiff.NewReader(bytes.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	var img []byte
	for {
		rec, err := d.Next()
		if errors.Is(err, io.EOF) {
			return img
		}
		if err != nil {
			t.Fatal(err)
		}
		switch rec.Tag {
		case rbddiff.TagSize:
			img = make([]byte, rec.Size)
		case rbddiff.TagWrite:
			if _, err := io.ReadFull(rec.Data, img[rec.Offset:rec.Offset+rec.Length]); err != nil {
				t.Fatal(err)
			}
		case rbddiff.TagZero:
			clear(img[rec.Offset : rec.Offset+rec.Length])
		case rbddiff.TagFromSnap, rbddiff.TagToSnap:
			t.Errorf("the restore stream has a snapshot record %q: import-diff would make it", rec.Tag)
		}
	}
}

// bufAt is an io.WriterAt over a byte slice.
type bufAt []byte

func (b bufAt) WriteAt(p []byte, off int64) (int, error) { return copy(b[off:], p), nil }

// countingStore counts the chunk reads of a store.
type countingStore struct {
	Store
	gets atomic.Int64
}

func (c *countingStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if strings.HasPrefix(key, chunkDir) {
		c.gets.Add(1)
	}
	return c.Store.Get(ctx, key)
}

func checkRestores(t *testing.T, r *Repo, v *Volume, model []byte) {
	t.Helper()
	ctx := context.Background()
	if v.SizeBytes != int64(len(model)) {
		t.Fatalf("volume of %d bytes, the image has %d", v.SizeBytes, len(model))
	}
	var stream bytes.Buffer
	if err := r.RestoreRBDDiff(ctx, v, &stream, nil); err != nil {
		t.Fatal(err)
	}
	if got := applyDiff(t, stream.Bytes()); !bytes.Equal(got, model) {
		t.Error("RestoreRBDDiff: the image differs")
	}
	raw := make(bufAt, v.SizeBytes)
	if err := r.RestoreRaw(ctx, v, raw, nil); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(raw, model) {
		t.Error("RestoreRaw: the image differs")
	}
}

// WriteRBDDiff against a model image: full, incremental with writes and
// zeros that do not cover whole chunks (merged onto the base), growth
// and shrinking; every result restores to the model both ways.
func TestWriteRBDDiff(t *testing.T) {
	ctx := context.Background()
	ds, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := &countingStore{Store: ds}
	const cs = MinChunkSize
	r := New(s, Options{ChunkSize: cs})
	rng := rand.New(rand.NewPCG(3, 3))
	var model []byte
	size := int64(16*cs + 1000)

	// Full: whole chunks, part chunks, a zero record, the short last chunk.
	full := diffOf(t, &model, "", "s1", size, []op{
		{0, cs, true}, {cs + 100, 50, true}, {3 * cs, 2*cs + 7, true}, {6 * cs, cs, false}, {16 * cs, 1000, true},
	}, rng)
	v1, st, err := r.WriteRBDDiff(ctx, bytes.NewReader(full), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v1.Snapshot != "s1" || v1.SizeBytes != size || st.ChunksUploaded != 6 || st.ZeroChunks != 11 {
		t.Errorf("full: snapshot %q, size %d, stats %+v; want s1, %d, 6 chunks uploaded, 11 zeros", v1.Snapshot, v1.SizeBytes, st, size)
	}
	checkRestores(t, r, v1, model)

	// Incremental: part of chunk 0 rewritten and part zeroed, chunk 4
	// (half written before) rewritten in part, chunk 9 (a hole) in part.
	s.gets.Store(0)
	inc := diffOf(t, &model, "s1", "s2", size, []op{
		{10, 20, true}, {100, 30, false}, {4*cs + 5, 10, true}, {9*cs + cs/2, cs / 4, true},
	}, rng)
	v2, st, err := r.WriteRBDDiff(ctx, bytes.NewReader(inc), v1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.ChunksUploaded != 3 || st.BytesRead != 30+cs/4 {
		t.Errorf("incremental stats %+v: want 3 chunks uploaded, %d bytes read (data records only)", st, 30+cs/4)
	}
	if got := s.gets.Load(); got != 2 {
		t.Errorf("incremental read %d base chunks, want 2 (chunks 0 and 4; chunk 9 had none)", got)
	}
	checkRestores(t, r, v2, model)

	// Whole-chunk records (rbd's --whole-object with the object size the
	// chunk size): no base chunk is read.
	s.gets.Store(0)
	whole := diffOf(t, &model, "s2", "s3", size, []op{{2 * cs, cs, true}, {5 * cs, cs, false}}, rng)
	v3, _, err := r.WriteRBDDiff(ctx, bytes.NewReader(whole), v2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := s.gets.Load(); got != 0 {
		t.Errorf("a whole-chunk diff read %d base chunks, want none", got)
	}
	checkRestores(t, r, v3, model)

	// Grown (the short last chunk becomes whole, with zeros) and a write
	// in the new part; then shrunk into the middle of a chunk.
	grown := diffOf(t, &model, "s3", "s4", size+3*cs, []op{{18 * cs, 10, true}}, rng)
	v4, _, err := r.WriteRBDDiff(ctx, bytes.NewReader(grown), v3, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkRestores(t, r, v4, model)
	shrunk := diffOf(t, &model, "s4", "s5", 3*cs+cs/3, nil, rng)
	v5, _, err := r.WriteRBDDiff(ctx, bytes.NewReader(shrunk), v4, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkRestores(t, r, v5, model)

	// What does not fit the base is refused.
	var m2 []byte
	for name, c := range map[string]struct {
		diff []byte
		base *Volume
		want string
	}{
		"incremental without base": {diffOf(t, &m2, "s1", "s2", size, nil, rng), nil, "needs the backup of that snapshot"},
		"full onto a base":         {diffOf(t, &m2, "", "s2", size, nil, rng), v1, "full one"},
		"from another snapshot":    {diffOf(t, &m2, "s0", "s2", size, nil, rng), v1, `base was backed up from "s1"`},
		"end snapshot an option":   {diffOf(t, &m2, "", "--x", size, nil, rng), nil, "end snapshot"},
		"empty image":              {diffOf(t, &m2, "", "s1", 0, nil, rng), nil, "volume size 0"},
		"not a diff":               {[]byte("rbd image v2\n"), nil, "invalid rbd export-diff"},
	} {
		if _, _, err := r.WriteRBDDiff(ctx, bytes.NewReader(c.diff), c.base, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, c.want)
		}
	}
}

// A base chunk that a partial write must be merged onto and that is
// corrupt fails the write (never merged blind).
func TestWriteRBDDiffVerifiesTheBase(t *testing.T) {
	ctx := context.Background()
	s, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const cs = MinChunkSize
	r := New(s, Options{ChunkSize: cs})
	rng := rand.New(rand.NewPCG(4, 4))
	var model []byte
	v1, _, err := r.WriteRBDDiff(ctx, bytes.NewReader(diffOf(t, &model, "", "a", 2*cs, []op{{0, 2 * cs, true}}, rng)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	key := chunkKey(v1.Chunks[0])
	if err := s.Put(ctx, key, strings.NewReader("junk"), 4); err != nil {
		t.Fatal(err)
	}
	_, _, err = r.WriteRBDDiff(ctx, bytes.NewReader(diffOf(t, &model, "a", "b", 2*cs, []op{{5, 5, true}}, rng)), v1, nil)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), key) {
		t.Errorf("merge onto a corrupt base chunk: %v, want ErrCorrupt naming %s", err, key)
	}
}
