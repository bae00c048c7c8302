package imagestore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Who may read an image: its owner (root) and its group, which is the
// image directory's group, and nobody else. The node agent makes that
// group QEMU's (ShareWith), so QEMU reads the images it is given whether
// or not libvirt relabels them (dynamic_ownership), while other users of
// the host read none: an image holds whatever its source served.
// Without the agent (an `image import` on a host whose agent never ran)
// the group is the directory's as created, root's, and QEMU reads through
// libvirt's relabelling, its default.

// imageMode is the mode of every image the store writes.
const imageMode fs.FileMode = 0o640

// restrict gives the open file f, a new image, imageMode and the image
// directory's group.
func (s *Store) restrict(f *os.File) error {
	gid, err := dirGroup(s.dir)
	if err != nil {
		return err
	}
	if err := f.Chmod(imageMode); err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Gid) == gid {
		return nil
	}
	if err := f.Chown(-1, gid); err != nil {
		return fmt.Errorf("giving the image the group of %s (%d): %w", s.dir, gid, err)
	}
	return nil
}

func dirGroup(dir string) (int, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("no owner of %s", dir)
	}
	return int(st.Gid), nil
}

// ShareWith makes gid (QEMU's group) the image directory's group, which
// every image the store writes gets, and brings the images there already
// in line: nobody but their owner and group may read them, and those root
// owns get the group. An image libvirt has relabelled for a running guest
// (owned by QEMU's user) keeps its owner; libvirt gives it back.
func (s *Store) ShareWith(gid int) error {
	if err := os.Chown(s.dir, -1, gid); err != nil {
		return fmt.Errorf("image directory %s: %w", s.dir, err)
	}
	var errs []error
	err := filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == s.dir {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil // the store's own files
		}
		if !d.Type().IsRegular() {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return nil // removed meanwhile
		}
		if fi.Mode().Perm()&0o007 != 0 {
			if err := os.Chmod(path, fi.Mode().Perm()&^0o007); err != nil {
				errs = append(errs, err)
			}
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid == 0 && int(st.Gid) != gid {
			if err := os.Lchown(path, -1, gid); err != nil {
				errs = append(errs, err)
			}
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}

// quantity renders n bytes for messages ("64Pi", "2Ti").
func quantity(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}
