package adopt

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// InDir reports whether p is below dir, lexically: both absolute; "/a/bc"
// is not in "/a/b". dir itself is not in dir.
func InDir(dir, p string) bool {
	if dir == "" || !filepath.IsAbs(dir) || !filepath.IsAbs(p) {
		return false
	}
	dir = filepath.Clean(dir)
	if dir == "/" {
		return p != "/"
	}
	return strings.HasPrefix(p, dir+"/")
}

func inAny(dirs []string, p string) bool {
	for _, d := range dirs {
		if InDir(d, p) {
			return true
		}
	}
	return false
}

// CheckDirs checks the directories a node allows adoption from (its
// --adopt-dir flags) and returns them resolved: each absolute, an
// existing directory, and neither inside nor around one of the node's
// own (its data directory, its image directory), whose files are
// virtplane's and never a domain's to hand over. Symlinks are resolved,
// so that the checks of a disk compare real paths.
func CheckDirs(dirs []string, own ...string) ([]string, error) {
	var out []string
	for _, d := range dirs {
		if !filepath.IsAbs(d) {
			return nil, fmt.Errorf("adopt dir %q: must be an absolute path", d)
		}
		real, err := filepath.EvalSymlinks(d)
		if err != nil {
			return nil, fmt.Errorf("adopt dir %q: %w", d, err)
		}
		fi, err := os.Stat(real)
		if err != nil {
			return nil, fmt.Errorf("adopt dir %q: %w", d, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("adopt dir %q: not a directory", d)
		}
		if real == "/" {
			return nil, fmt.Errorf("adopt dir %q: the root directory would hand every file of the host to a VM", d)
		}
		for _, o := range own {
			if o == "" {
				continue
			}
			ro, err := filepath.EvalSymlinks(o)
			if err != nil {
				ro = filepath.Clean(o) // not made yet
			}
			if real == ro || InDir(real, ro) || InDir(ro, real) {
				return nil, fmt.Errorf("adopt dir %q: overlaps %s, which holds virtplane's own files", d, o)
			}
		}
		out = append(out, real)
	}
	return out, nil
}

// ErrNotAdoptable is a disk file that may not become a volume.
var ErrNotAdoptable = errors.New("not adoptable")

// CheckFile checks the file a domain names as a disk before the node
// reads it: its real path (symlinks resolved: a link inside an allowed
// directory that points out of it does not count) must be inside one of
// dirs (CheckDirs' output) and a regular file, not a device or a
// directory. It returns the real path, which is what the node records and
// later copies.
func CheckFile(p string, dirs []string) (string, error) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotAdoptable, err)
	}
	if !inAny(dirs, real) {
		return "", fmt.Errorf("%w: %s is %s, outside the directories this node allows adoption from", ErrNotAdoptable, p, real)
	}
	fi, err := os.Lstat(real)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNotAdoptable, err)
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%w: %s is not a regular file (%s)", ErrNotAdoptable, real, fi.Mode().Type())
	}
	return real, nil
}
