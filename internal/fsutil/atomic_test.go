package fsutil

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	for _, data := range []string{"first", "second, longer"} {
		if err := WriteFileAtomic(p, []byte(data), 0o640); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(p)
		if err != nil || string(b) != data {
			t.Fatalf("read %q, %v; want %q", b, err, data)
		}
	}
	if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, %v", st.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("temporary files left: %v", entries)
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "f"), nil, 0o600); err == nil {
		t.Fatal("no error for a missing directory")
	}
}

// Commit moves a finished file into place; a tmp that is not there (a
// writer that crashed before creating it) leaves no file at path.
func TestCommit(t *testing.T) {
	dir := t.TempDir()
	tmp, path := filepath.Join(dir, "vol.qcow2.tmp"), filepath.Join(dir, "vol.qcow2")
	if err := os.WriteFile(tmp, []byte("whole"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Commit(tmp, path); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "whole" {
		t.Fatalf("committed file: %q, %v", b, err)
	}
	if _, err := os.Stat(tmp); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("tmp left: %v", err)
	}
	if err := Commit(filepath.Join(dir, "gone.tmp"), filepath.Join(dir, "gone")); err == nil {
		t.Fatal("committing a missing file succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a failed commit made the file: %v", err)
	}
	other := t.TempDir()
	if err := os.WriteFile(tmp, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Commit(tmp, filepath.Join(other, "vol.qcow2")); err == nil {
		t.Fatal("a commit across directories (not one atomic rename) succeeded")
	}
}

func TestMkdirAll(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b", "c")
	created, err := MkdirAll(dir, 0o711)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{filepath.Join(root, "a"), filepath.Join(root, "a", "b"), dir}
	if !slices.Equal(created, want) {
		t.Fatalf("created %q, want %q", created, want)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("%s: %v", dir, err)
	}
	if created, err := MkdirAll(dir, 0o711); err != nil || len(created) != 0 {
		t.Fatalf("again: created %q, %v", created, err)
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := MkdirAll(filepath.Join(file, "x"), 0o711); err == nil {
		t.Fatal("a directory under a file")
	}
	if err := SyncDir(filepath.Join(root, "missing")); err == nil {
		t.Fatal("syncing a missing directory succeeded")
	}
}
