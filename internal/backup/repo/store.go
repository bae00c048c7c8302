package repo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Store is where a repository's objects live. Keys are slash-separated
// and relative (ValidateKey); Put is atomic: an object is visible only
// complete (temp file, fsync and rename in a directory; one PUT or a
// multipart completion in S3), so a reader never sees half an object
// that a writer is still sending. Putting a key that exists replaces it
// (and renews its ModTime).
type Store interface {
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Get opens an object; a missing one is ErrNotFound (errors.Is).
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Stat is an object's size and time; a missing one is ErrNotFound.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// List calls fn for every object whose key starts with prefix, in no
	// particular order; an error from fn stops it and is returned.
	List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error
	// Delete removes an object; a missing one is not an error.
	Delete(ctx context.Context, key string) error
}

// ObjectInfo is what a Store says of an object.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
}

var (
	// ErrNotFound is an object (or a manifest) that is not there.
	ErrNotFound = errors.New("not found")
	// ErrCorrupt is an object whose bytes are not what its name or its
	// manifest says: altered, truncated, or missing when a manifest
	// names it. A *CorruptError carries which.
	ErrCorrupt = errors.New("backup repository object is corrupt")
	// ErrInvalidKey is a key that ValidateKey refuses.
	ErrInvalidKey = errors.New("invalid object key")
)

// CorruptError is an object found corrupt: which one, for which volume
// (when a volume is being restored or verified), and why. errors.Is(err,
// ErrCorrupt) holds for it, and errors.Is(err, ErrNotFound) when the
// object is missing.
type CorruptError struct {
	Key    string // the object's key
	Volume string // the volume it belongs to, or ""
	Reason string // what is wrong, for people
	Err    error  // the underlying error, or nil
}

func (e *CorruptError) Error() string {
	var b strings.Builder
	b.WriteString(ErrCorrupt.Error())
	b.WriteString(": ")
	b.WriteString(e.Key)
	if e.Volume != "" {
		fmt.Fprintf(&b, " (volume %q)", e.Volume)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

func (e *CorruptError) Unwrap() error { return e.Err }

// MaxKeyLen bounds a key: S3 allows 1,024 bytes, and every key here is
// far shorter (a chunk's is 72).
const MaxKeyLen = 512

// ValidateKey checks a key: 1 to MaxKeyLen bytes of [a-z0-9._/-],
// relative (no leading "/"), no empty segment (no "//", no trailing
// "/"), and no segment that starts with "." (so neither "." nor ".." nor
// a directory store's temporary files). What passes is one path below a
// store's root and the same object name in S3.
func ValidateKey(key string) error {
	if err := validatePath(key, false); err != nil {
		return fmt.Errorf("%w %q: %v", ErrInvalidKey, clip(key), err)
	}
	return nil
}

// validatePrefix checks a List prefix: "" (everything) or a key, which
// may end in "/" (everything below that directory) or in the middle of a
// segment ("manifests/<id>." lists the objects whose names start so).
func validatePrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if err := validatePath(prefix, true); err != nil {
		return fmt.Errorf("%w prefix %q: %v", ErrInvalidKey, clip(prefix), err)
	}
	return nil
}

func validatePath(key string, prefix bool) error {
	switch {
	case key == "":
		return errors.New("empty")
	case len(key) > MaxKeyLen:
		return fmt.Errorf("longer than %d bytes", MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '/' || c == '-') {
			return fmt.Errorf("byte %d (%q) is not one of [a-z0-9._/-]", i, c)
		}
	}
	segs := strings.Split(key, "/")
	for i, s := range segs {
		switch {
		case s == "" && prefix && i == len(segs)-1 && i > 0:
			// "dir/": everything below dir.
		case s == "":
			return errors.New("empty path segment (a leading, doubled or trailing \"/\")")
		case s[0] == '.':
			return fmt.Errorf("segment %q starts with \".\"", s)
		}
	}
	return nil
}

// clip shortens what is quoted back in an error: a hostile key can be
// long.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
