package imagestore

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const mib = 1 << 20

func newStore(t *testing.T) *Store {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed (Debian package qemu-utils)")
	}
	s, err := Open(filepath.Join(t.TempDir(), "images"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func qemuImg(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// makeRaw writes a sparse raw disk of size bytes whose first dataLen
// bytes are random.
func makeRaw(t *testing.T, path string, size, dataLen int64) {
	t.Helper()
	data := make([]byte, dataLen)
	rand.Read(data)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

// makeQCOW2 writes a qcow2 of virtual size vsize with 3 MiB of random
// data, so it has allocated clusters that a truncation cuts off. Extra
// arguments go to qemu-img convert ("-c" compresses).
func makeQCOW2(t *testing.T, path string, vsize int64, convertArgs ...string) {
	t.Helper()
	raw := path + ".src.raw"
	makeRaw(t, raw, vsize, 3*mib)
	// Compressible data too, so that -c makes clusters of odd lengths.
	f, err := os.OpenFile(raw, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte(strings.Repeat("virtplane ", 300000)), 3*mib)
	f.Close()
	qemuImg(t, append(append([]string{"convert", "-f", "raw", "-O", "qcow2"}, convertArgs...), raw, path)...)
	os.Remove(raw)
}

func sha256File(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// storeFiles lists every file under the store, hidden ones included.
func storeFiles(t *testing.T, s *Store) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(s.Dir(), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(s.Dir(), p)
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	return files
}

func assertStoreFiles(t *testing.T, s *Store, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := storeFiles(t, s); !slices.Equal(got, want) {
		t.Errorf("store holds %q, want %q", got, want)
	}
}
