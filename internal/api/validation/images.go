package validation

import (
	"fmt"
	"path/filepath"
	"strings"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxImagePathLen is Linux's PATH_MAX; longer paths cannot be opened anyway.
const maxImagePathLen = 4096

// maxImageNameElemLen is Linux's NAME_MAX: no file name is longer.
const maxImageNameElemLen = 255

// ValidateImageName checks an image name: the path of an image relative to
// the node image directory, as the image store (internal/imagestore) names
// images, nodes list them and volumes refer to them. It is the one rule
// for all of them:
//
//   - relative and local (filepath.IsLocal): no "..", not absolute;
//   - in clean form (no "//", "./" or trailing "/"), so that one image has
//     one name, the name placement compares node lists with;
//   - no element starts with ".": those are the store's own files (the
//     ".NAME.info.json" checksum sidecars and ".NAME.tmp-*" imports in
//     progress), which a volume must never open as a disk;
//   - printable: no NUL or other control characters (names end up in logs
//     and terminals), at most PATH_MAX bytes, elements at most NAME_MAX.
func ValidateImageName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(path, "")}
	}
	if msg := imageNameProblem(name); msg != "" {
		if len(name) > maxImagePathLen {
			return field.ErrorList{field.TooLong(path, "", maxImagePathLen)}
		}
		return field.ErrorList{field.Invalid(path, name, msg)}
	}
	return nil
}

// imageNameProblem says what is wrong with image name, or "" when nothing
// is. name is not empty.
func imageNameProblem(name string) string {
	switch {
	case len(name) > maxImagePathLen:
		return fmt.Sprintf("must be at most %d bytes", maxImagePathLen)
	case strings.IndexByte(name, 0) >= 0:
		return "must not contain NUL bytes"
	case !utf8.ValidString(name):
		return "must be valid UTF-8"
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return "must not contain control characters"
	case filepath.IsAbs(name):
		return "must be a path relative to the node image directory"
	}
	for _, elem := range strings.Split(name, "/") {
		if elem == ".." {
			return `must not contain ".." elements`
		}
	}
	if c := filepath.Clean(name); c != name {
		if c == "." {
			return "must name a file inside the node image directory"
		}
		return fmt.Sprintf("must be in clean form (%q): one image, one name", c)
	}
	if !filepath.IsLocal(name) {
		return "must stay inside the node image directory"
	}
	for _, elem := range strings.Split(name, "/") {
		switch {
		case strings.HasPrefix(elem, "."):
			return fmt.Sprintf("element %q must not start with '.': such names are the image store's own files (checksum sidecars, imports in progress)", elem)
		case len(elem) > maxImageNameElemLen:
			return fmt.Sprintf("each element must be at most %d bytes", maxImageNameElemLen)
		}
	}
	return ""
}

// ValidateImagePath checks an image reference (image volume name,
// persistent.image, kernel, initrd): an image name (ValidateImageName), or
// an absolute path inside imageDir, when imageDir is known, whose part
// below imageDir is an image name. The check is lexical; symlinks inside
// the image directory are the operator's business.
func ValidateImagePath(p string, path *field.Path, imageDir string) field.ErrorList {
	switch {
	case p == "":
		return field.ErrorList{field.Required(path, "")}
	case len(p) > maxImagePathLen:
		return field.ErrorList{field.TooLong(path, "", maxImagePathLen)}
	case !filepath.IsAbs(p):
		return ValidateImageName(p, path)
	case strings.IndexByte(p, 0) >= 0:
		return field.ErrorList{field.Invalid(path, p, "must not contain NUL bytes")}
	}
	prefix, ok := imageDirPrefix(imageDir)
	if !ok {
		return field.ErrorList{field.Invalid(path, p, "must be a path relative to the node image directory")}
	}
	// The prefix ends in "/", so the directory itself does not match.
	name, inside := strings.CutPrefix(p, prefix)
	switch {
	case !inside:
		return field.ErrorList{field.Invalid(path, p, fmt.Sprintf("must be inside the image directory %s", filepath.Clean(imageDir)))}
	case name == "":
		return field.ErrorList{field.Invalid(path, p, fmt.Sprintf("must name a file inside the image directory %s", filepath.Clean(imageDir)))}
	}
	if msg := imageNameProblem(name); msg != "" {
		return field.ErrorList{field.Invalid(path, p, fmt.Sprintf("the part below the image directory %s: %s", filepath.Clean(imageDir), msg))}
	}
	return nil
}

// imageDirPrefix returns the cleaned image directory with a trailing slash,
// so that "/images-old/x" does not count as inside "/images". ok is false
// when imageDir is unusable for confinement (empty or relative).
func imageDirPrefix(imageDir string) (prefix string, ok bool) {
	if imageDir == "" || !filepath.IsAbs(imageDir) || strings.IndexByte(imageDir, 0) >= 0 {
		return "", false
	}
	dir := filepath.Clean(imageDir)
	if dir == "/" {
		return dir, true
	}
	return dir + "/", true
}

// ResolveImagePath returns the absolute path of image p under imageDir,
// after the same checks as ValidateImagePath. Node agents use it to open
// images.
func ResolveImagePath(imageDir, p string) (string, error) {
	if _, ok := imageDirPrefix(imageDir); !ok {
		return "", fmt.Errorf("image directory %q must be an absolute path", imageDir)
	}
	if errs := ValidateImagePath(p, field.NewPath("image"), imageDir); len(errs) > 0 {
		return "", errs.ToAggregate()
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p), nil
	}
	return filepath.Join(filepath.Clean(imageDir), p), nil
}
