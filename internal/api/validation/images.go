package validation

import (
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxImagePathLen is Linux's PATH_MAX; longer paths cannot be opened anyway.
const maxImagePathLen = 4096

// ValidateImagePath checks an image reference (image volume name,
// persistent.image, kernel, initrd). Images live in the node image
// directory, so a reference must not reach outside it: ".." elements are
// rejected outright, and absolute paths are accepted only when imageDir is
// known and the path lies inside it. The check is lexical; symlinks inside
// the image directory are the operator's business.
func ValidateImagePath(p string, path *field.Path, imageDir string) field.ErrorList {
	switch {
	case p == "":
		return field.ErrorList{field.Required(path, "")}
	case len(p) > maxImagePathLen:
		return field.ErrorList{field.TooLong(path, "", maxImagePathLen)}
	case strings.IndexByte(p, 0) >= 0:
		return field.ErrorList{field.Invalid(path, p, "must not contain NUL bytes")}
	}
	for _, elem := range strings.Split(p, "/") {
		if elem == ".." {
			return field.ErrorList{field.Invalid(path, p, `must not contain ".." elements`)}
		}
	}
	if filepath.IsAbs(p) {
		prefix, ok := imageDirPrefix(imageDir)
		if !ok {
			return field.ErrorList{field.Invalid(path, p, "must be a path relative to the node image directory")}
		}
		// The prefix ends in "/", so the directory itself does not match.
		if !strings.HasPrefix(filepath.Clean(p), prefix) || filepath.Clean(p) == "/" {
			return field.ErrorList{field.Invalid(path, p, fmt.Sprintf("must be inside the image directory %s", filepath.Clean(imageDir)))}
		}
		return nil
	}
	// Without ".." elements Clean cannot climb out; it can only collapse the
	// path to the directory itself ("." or "./"), which is not an image.
	if filepath.Clean(p) == "." {
		return field.ErrorList{field.Invalid(path, p, "must name a file inside the node image directory")}
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
