package repo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	clocktesting "k8s.io/utils/clock/testing"
)

const (
	mib = int64(1 << 20)
	// The integration volume: 256 MiB with 64 MiB written, then 8 MiB
	// changed.
	volSize    = 256 * mib
	volData    = 64 * mib
	volChanged = 8 * mib
)

// fill writes n bytes at off in f: half of every 4 KiB block random,
// half a repeated byte, so that chunks compress about 2:1 like real
// disks rather than not at all (random) or to nothing (a pattern).
func fill(t testing.TB, f *os.File, off, n int64, rng *rand.Rand) {
	t.Helper()
	buf := make([]byte, n)
	for b := int64(0); b < n; b += 4096 {
		blk := buf[b:min(b+4096, n)]
		for i := range blk {
			if i < 2048 {
				blk[i] = byte(rng.Uint32())
			} else {
				blk[i] = byte(b / 4096)
			}
		}
	}
	if _, err := f.WriteAt(buf, off); err != nil {
		t.Fatal(err)
	}
}

// sparseVolume makes a sparse raw file of size with data in the given
// ranges.
func sparseVolume(t testing.TB, path string, size int64, data []Range, seed uint64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, seed))
	for _, r := range data {
		fill(t, f, r.Offset, r.Length, rng)
	}
}

func fileSum(t testing.TB, path string) [32]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	var s [32]byte
	copy(s[:], h.Sum(nil))
	return s
}

// restoreTo restores v into a new sparse file at path.
func restoreTo(ctx context.Context, r *Repo, v *Volume, path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(v.SizeBytes); err != nil {
		return err
	}
	return r.RestoreRaw(ctx, v, f, nil)
}

func writeRawFile(ctx context.Context, t testing.TB, r *Repo, path string, base *Volume, p ProgressFunc) (*Volume, WriteStats) {
	t.Helper()
	src, err := OpenRawFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	v, st, err := r.WriteRaw(ctx, src, base, p)
	if err != nil {
		t.Fatal(err)
	}
	return v, st
}

func newManifest(v *Volume, created time.Time) *Manifest {
	v.Name, v.StorageClass, v.ClassKind = "data", "local", ClassKindLocal
	return &Manifest{ID: uuid.NewString(), Cluster: "test", VMNamespace: "default", VMName: "vm", VMUID: testVMUID,
		Created: created, Spec: []byte(`{"metadata":{"name":"vm"}}`), Volumes: []Volume{*v}}
}

// exerciseRepo is the integration test of a repository over s (empty):
// a full backup of a sparse 256 MiB volume with 64 MiB written, an
// incremental one after 8 MiB changed, restores of both compared byte
// for byte, GC after the first is deleted, and corruption found at
// restore. Both store kinds run it.
func exerciseRepo(t *testing.T, s Store) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := clocktesting.NewFakeClock(time.Now())
	r := New(s, Options{Clock: clk})

	// 16 regions of 4 MiB, each across a chunk boundary: 32 chunks of
	// 64 hold data.
	var data []Range
	for i := range volData / (4 * mib) {
		data = append(data, Range{Offset: i*16*mib + 2*mib, Length: 4 * mib})
	}
	img := filepath.Join(dir, "vol.raw")
	sparseVolume(t, img, volSize, data, 1)
	sum1 := fileSum(t, img)

	var last Progress
	began := time.Now()
	v1, st1 := writeRawFile(ctx, t, r, img, nil, func(p Progress) { last = p })
	t.Logf("full backup of %d MiB (%d MiB data): %+v in %s", volSize/mib, volData/mib, st1, time.Since(began).Round(time.Millisecond))
	if last != (Progress{Done: volSize, Total: volSize}) {
		t.Errorf("last progress %+v, want %d/%d", last, volSize, volSize)
	}
	if st1.ChunksTotal != 64 || st1.ZeroChunks != 32 || st1.ChunksUploaded != 32 || st1.BytesRead != 32*4*mib {
		t.Errorf("full backup stats %+v: want 64 chunks, 32 zeros (holes never read), 32 uploaded, 128 MiB read", st1)
	}
	if st1.BytesWritten <= 0 || st1.BytesWritten > volData {
		t.Errorf("full backup wrote %d bytes, want some and at most the %d of data (compressed)", st1.BytesWritten, volData)
	}
	m1 := newManifest(v1, clk.Now())
	if err := r.PutManifest(ctx, m1); err != nil {
		t.Fatal(err)
	}
	if err := r.PutManifest(ctx, m1); !errors.Is(err, ErrExists) {
		t.Errorf("a second PutManifest of one id = %v, want ErrExists", err)
	}

	// 8 MiB changed at 66.5 MiB, not aligned to chunks: chunks 16 and 17
	// change, and chunk 18, a hole until now, gets data.
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, f, 4*16*mib+2*mib+512<<10, volChanged, rand.New(rand.NewPCG(2, 2)))
	f.Close()
	sum2 := fileSum(t, img)
	clk.Step(time.Minute)
	began = time.Now()
	v2, st2 := writeRawFile(ctx, t, r, img, v1, nil)
	t.Logf("incremental backup after %d MiB changed: %+v in %s (%.1f%% of the volume written)", volChanged/mib, st2,
		time.Since(began).Round(time.Millisecond), 100*float64(st2.BytesWritten)/float64(volSize))
	if st2.ChunksUploaded != 3 || st2.ZeroChunks != 31 || st2.ChunksReused != 30 || st2.BytesWritten > 3*4*mib || st2.BytesWritten > volSize/16 {
		t.Errorf("incremental backup stats %+v: want 3 chunks uploaded, far below the volume size", st2)
	}
	m2 := newManifest(v2, clk.Now())
	m2.Volumes[0].Parent = m1.ID
	if err := r.PutManifest(ctx, m2); err != nil {
		t.Fatal(err)
	}

	list, err := r.ListManifests(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != m2.ID || list[1].ID != m1.ID || list[0].SizeBytes != volSize || list[0].VMName != "vm" {
		t.Errorf("ListManifests = %+v, want m2 then m1", list)
	}

	// Restores, byte for byte.
	for i, c := range []struct {
		id  string
		sum [32]byte
	}{{m1.ID, sum1}, {m2.ID, sum2}} {
		m, err := r.GetManifest(ctx, c.id)
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, fmt.Sprintf("restore-%d.raw", i))
		began := time.Now()
		if err := restoreTo(ctx, r, &m.Volumes[0], out); err != nil {
			t.Fatal(err)
		}
		if fileSum(t, out) != c.sum {
			t.Errorf("restore of backup %d differs from the volume it was taken of", i+1)
		}
		t.Logf("restore %d: %s", i+1, time.Since(began).Round(time.Millisecond))
		os.Remove(out)
	}

	// GC: young unreferenced chunks are kept; once m1 is gone and the
	// grace passed, what only m1 named is deleted, and m2 restores whole.
	if err := r.DeleteManifest(ctx, m1.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := r.GetManifest(ctx, m1.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetManifest of a deleted backup = %v, want ErrNotFound", err)
	}
	gs, err := r.GC(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if gs.ChunksDeleted != 0 || gs.ChunksKept != 2 {
		t.Errorf("GC within the grace: %+v, want the 2 chunks only m1 named kept", gs)
	}
	clk.Step(2 * DefaultGCGrace)
	gs, err = r.GC(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("GC after deleting the first backup: %+v", gs)
	if gs.Manifests != 1 || gs.ChunksDeleted != 2 || gs.ChunksReferenced != 33 {
		t.Errorf("GC: %+v, want 1 manifest, 33 chunks referenced, the 2 only m1 named deleted", gs)
	}
	if err := r.Verify(ctx, m2.ID); err != nil {
		t.Errorf("Verify after GC: %v", err)
	}
	out := filepath.Join(dir, "after-gc.raw")
	if err := restoreTo(ctx, r, &m2.Volumes[0], out); err != nil {
		t.Fatal(err)
	}
	if fileSum(t, out) != sum2 {
		t.Error("restore after GC differs")
	}
	os.Remove(out)

	corruptionIsFound(t, r, s, m2)
}

// corruptionIsFound alters, truncates and removes objects of m and
// checks that each is ErrCorrupt naming the object and the volume at
// restore and at Verify, and that no byte of a bad chunk reaches the
// destination.
func corruptionIsFound(t *testing.T, r *Repo, s Store, m *Manifest) {
	ctx := context.Background()
	dir := t.TempDir()
	v := &m.Volumes[0]
	var ci int
	for ci = range v.Chunks {
		if v.Chunks[ci] != "" {
			break
		}
	}
	key := chunkKey(v.Chunks[ci])
	orig := readObject(t, s, key)
	other := encoder().EncodeAll(bytes.Repeat([]byte{7}, int(chunkLen(v.SizeBytes, v.ChunkSize, ci))), nil)
	for name, bad := range map[string][]byte{
		"altered (another chunk's valid bytes)": other,
		"altered (a byte flipped)":              flip(orig, len(orig)/2),
		"truncated":                             orig[:len(orig)/2],
		"empty":                                 {},
		"missing":                               nil,
	} {
		t.Run(name, func(t *testing.T) {
			if bad == nil {
				if err := s.Delete(ctx, key); err != nil {
					t.Fatal(err)
				}
			} else if err := s.Put(ctx, key, bytes.NewReader(bad), int64(len(bad))); err != nil {
				t.Fatal(err)
			}
			defer func() {
				if err := s.Put(ctx, key, bytes.NewReader(orig), int64(len(orig))); err != nil {
					t.Fatal(err)
				}
			}()
			out := filepath.Join(dir, "restore.raw")
			defer os.Remove(out)
			err := restoreTo(ctx, r, v, out)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), `"data"`) {
				t.Errorf("restore with a %s chunk: %v, want ErrCorrupt naming %s and the volume", name, err, key)
			}
			if bad == nil && !errors.Is(err, ErrNotFound) {
				t.Errorf("restore with a missing chunk: %v, want ErrNotFound too", err)
			}
			// The bad chunk's bytes are never written: its place reads
			// zeros (the file is the caller's to delete).
			got := make([]byte, chunkLen(v.SizeBytes, v.ChunkSize, ci))
			fo, _ := os.Open(out)
			_, _ = fo.ReadAt(got, int64(ci)*v.ChunkSize)
			fo.Close()
			if !isZero(got) {
				t.Error("bytes of the bad chunk reached the destination")
			}
			var w bytes.Buffer
			err = r.RestoreRBDDiff(ctx, v, &w, nil)
			if !errors.Is(err, ErrCorrupt) {
				t.Errorf("RestoreRBDDiff with a %s chunk: %v, want ErrCorrupt", name, err)
			}
			if b := w.Bytes(); len(b) > 0 && b[len(b)-1] == 'e' {
				t.Error("RestoreRBDDiff ended its stream after an error: import-diff would take it")
			}
			if err := r.Verify(ctx, m.ID); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), key) {
				t.Errorf("Verify with a %s chunk: %v, want ErrCorrupt naming %s", name, err, key)
			}
		})
	}

	// A truncated manifest is ErrCorrupt, not a JSON error; listing and
	// GC refuse to go on without it.
	var mkey string
	_ = s.List(ctx, manifestDir+m.ID+".", func(o ObjectInfo) error { mkey = o.Key; return nil })
	morig := readObject(t, s, mkey)
	for name, bad := range map[string][]byte{"truncated": morig[:len(morig)-10], "altered": flip(morig, 20)} {
		if err := s.Put(ctx, mkey, bytes.NewReader(bad), int64(len(bad))); err != nil {
			t.Fatal(err)
		}
		if _, err := r.GetManifest(ctx, m.ID); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), mkey) {
			t.Errorf("GetManifest of a %s manifest: %v, want ErrCorrupt naming %s", name, err, mkey)
		}
		if _, err := r.ListManifests(ctx); !errors.Is(err, ErrCorrupt) {
			t.Errorf("ListManifests with a %s manifest: %v, want ErrCorrupt", name, err)
		}
		if st, err := r.GC(ctx, time.Nanosecond); err == nil || st.ChunksDeleted != 0 {
			t.Errorf("GC with a %s manifest: %+v, %v; want an error and nothing deleted", name, st, err)
		}
	}
	if err := s.Put(ctx, mkey, bytes.NewReader(morig), int64(len(morig))); err != nil {
		t.Fatal(err)
	}
	if err := r.Verify(ctx, m.ID); err != nil {
		t.Errorf("Verify after repair: %v", err)
	}
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x55
	return c
}

func readObject(t testing.TB, s Store, key string) []byte {
	t.Helper()
	rc, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRepoOnDirectory(t *testing.T) {
	s, err := OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	exerciseRepo(t, s)
}
