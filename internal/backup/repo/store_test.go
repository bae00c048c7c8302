package repo

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestValidateKey(t *testing.T) {
	for _, k := range []string{"a", "chunks/ab/" + strings.Repeat("ab", 32), "manifests/x.json", "a-b_c.d/e"} {
		if err := ValidateKey(k); err != nil {
			t.Errorf("ValidateKey(%q) = %v, want nil", k, err)
		}
	}
	for _, k := range []string{"", "/a", "a/", "a//b", "../a", "a/../b", "a/..", ".", "./a", "a/.tmp-1", ".hidden",
		"A", "a b", "a\\b", "a\x00b", "a\nb", "é", strings.Repeat("a", MaxKeyLen+1)} {
		err := ValidateKey(k)
		if !errors.Is(err, ErrInvalidKey) {
			t.Errorf("ValidateKey(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
	for _, p := range []string{"", "chunks/", "manifests/6f1c.", "a/b/"} {
		if err := validatePrefix(p); err != nil {
			t.Errorf("validatePrefix(%q) = %v, want nil", p, err)
		}
	}
	for _, p := range []string{"/", "/a", "a//", "../", "a/../", ".tmp-"} {
		if err := validatePrefix(p); err == nil {
			t.Errorf("validatePrefix(%q) = nil, want an error", p)
		}
	}
}

// The directory store: what Store promises, on real files.
func TestDirStore(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	if _, err := OpenDir("relative/dir"); err == nil {
		t.Error("OpenDir of a relative path: no error")
	}
	if _, err := OpenDir(filepath.Join(root, "missing")); err == nil {
		t.Error("OpenDir of a missing directory: no error")
	}
	s, err := OpenDir(root)
	if err != nil {
		t.Fatal(err)
	}
	testStore(t, s)

	// Objects are 0600 in 0700 directories, and nothing half-written is
	// left behind.
	if err := s.Put(ctx, "d/e/f", strings.NewReader("xyz"), 3); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{"d": 0o700, "d/e": 0o700, "d/e/f": 0o600} {
		fi, err := os.Stat(filepath.Join(root, p))
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", p, got, want)
		}
	}
	// A reader that gives fewer bytes than it said fails the Put, and
	// nothing is left: neither the object nor a temporary file.
	if err := s.Put(ctx, "d/e/short", strings.NewReader("ab"), 3); err == nil {
		t.Error("Put of 2 bytes as 3: no error")
	}
	if err := s.Put(ctx, "d/e/long", strings.NewReader("abcd"), 3); err == nil {
		t.Error("Put of 4 bytes as 3: no error")
	}
	entries, _ := os.ReadDir(filepath.Join(root, "d/e"))
	if len(entries) != 1 {
		t.Errorf("d/e holds %v, want only f", entries)
	}

	// A target can hold a symlink out of the directory: it is never
	// followed.
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "d/link")); err != nil {
		t.Fatal(err)
	}
	if rc, err := s.Get(ctx, "d/link"); err == nil {
		b, _ := io.ReadAll(rc)
		rc.Close()
		t.Errorf("Get of a symlink out of the root read %q", b)
	}
	if err := os.Symlink(filepath.Dir(outside), filepath.Join(root, "out")); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, "out/x", strings.NewReader("x"), 1); err == nil {
		t.Error("Put through a symlinked directory out of the root: no error")
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(outside), "x")); err == nil {
		t.Error("Put wrote outside the root")
	}
}

// testStore checks what every Store promises; s must be empty.
func testStore(t *testing.T, s Store) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Get(ctx, "a/b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of a missing object = %v, want ErrNotFound", err)
	}
	if _, err := s.Stat(ctx, "a/b"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Stat of a missing object = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "a/b"); err != nil {
		t.Errorf("Delete of a missing object = %v, want nil", err)
	}
	for _, k := range []string{"/abs", "../up", "a/./b", "UPPER"} {
		if err := s.Put(ctx, k, strings.NewReader("x"), 1); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", k, err)
		}
		if _, err := s.Get(ctx, k); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("Get(%q) = %v, want ErrInvalidKey", k, err)
		}
	}
	objs := map[string]string{"a/b": "hello", "a/c/d": "world!", "ab": "", "manifests/x.1.json": "m1", "manifests/x.2.json": "m2", "manifests/y.1.json": "m3"}
	for k, v := range objs {
		if err := s.Put(ctx, k, strings.NewReader(v), int64(len(v))); err != nil {
			t.Fatalf("Put(%q): %v", k, err)
		}
	}
	for k, v := range objs {
		rc, err := s.Get(ctx, k)
		if err != nil {
			t.Fatalf("Get(%q): %v", k, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(b) != v {
			t.Errorf("Get(%q) = %q, %v; want %q", k, b, err, v)
		}
		info, err := s.Stat(ctx, k)
		if err != nil || info.Size != int64(len(v)) || info.Key != k || info.ModTime.IsZero() {
			t.Errorf("Stat(%q) = %+v, %v", k, info, err)
		}
	}
	list := func(prefix string) []string {
		var keys []string
		if err := s.List(ctx, prefix, func(o ObjectInfo) error { keys = append(keys, o.Key); return nil }); err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		slices.Sort(keys)
		return keys
	}
	for prefix, want := range map[string][]string{
		"":             {"a/b", "a/c/d", "ab", "manifests/x.1.json", "manifests/x.2.json", "manifests/y.1.json"},
		"a/":           {"a/b", "a/c/d"},
		"a":            {"a/b", "a/c/d", "ab"},
		"manifests/x.": {"manifests/x.1.json", "manifests/x.2.json"},
		"nothing/":     nil,
	} {
		if got := list(prefix); !slices.Equal(got, want) {
			t.Errorf("List(%q) = %v, want %v", prefix, got, want)
		}
	}
	stop := errors.New("stop")
	if err := s.List(ctx, "", func(ObjectInfo) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("List with a failing fn = %v, want its error", err)
	}
	// Put replaces.
	if err := s.Put(ctx, "a/b", bytes.NewReader([]byte("bye")), 3); err != nil {
		t.Fatal(err)
	}
	if info, err := s.Stat(ctx, "a/b"); err != nil || info.Size != 3 {
		t.Errorf("Stat after a replacing Put = %+v, %v", info, err)
	}
	for k := range objs {
		if err := s.Delete(ctx, k); err != nil {
			t.Errorf("Delete(%q): %v", k, err)
		}
	}
	if got := list(""); len(got) != 0 {
		t.Errorf("after deleting everything, List = %v", got)
	}
}
