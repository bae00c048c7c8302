package imagestore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// fuzzImageDir is an image directory for checks that need no files.
const fuzzImageDir = "/var/lib/virtplane/images"

// checkImageRef checks what must hold for any image reference ref: if the
// API accepts it, it names a file inside the image directory that the
// store takes for an image (never a checksum sidecar or an import in
// progress), under the name the store and placement use; and every name
// the store accepts, the API accepts.
func checkImageRef(t *testing.T, ref string) {
	s := &Store{dir: fuzzImageDir}
	apiErrs := validation.ValidateImagePath(ref, field.NewPath("image"), fuzzImageDir)
	storeErr := ValidateName(ref)
	if storeErr == nil && len(apiErrs) > 0 {
		t.Fatalf("the store accepts %q but the API refuses it: %v", ref, apiErrs)
	}
	if !filepath.IsAbs(ref) && (storeErr == nil) != (len(apiErrs) == 0) {
		t.Fatalf("relative %q: store %v, API %v; one rule must decide both", ref, storeErr, apiErrs)
	}
	if len(apiErrs) > 0 {
		if _, err := validation.ResolveImagePath(fuzzImageDir, ref); err == nil {
			t.Fatalf("%q is refused but resolves", ref)
		}
		return
	}
	path, err := validation.ResolveImagePath(fuzzImageDir, ref)
	if err != nil {
		t.Fatalf("%q is accepted but does not resolve: %v", ref, err)
	}
	name, err := filepath.Rel(fuzzImageDir, path)
	if err != nil || !filepath.IsLocal(name) || name == "." {
		t.Fatalf("%q resolves to %q, outside the image directory (%q, %v)", ref, path, name, err)
	}
	for _, elem := range strings.Split(name, "/") {
		// The store's own files, which List never shows as images, all
		// start with a dot: sidecarPath's ".NAME.info.json" and the
		// ".NAME.tmp-*" of an import (tempMarker).
		if strings.HasPrefix(elem, ".") {
			t.Fatalf("%q resolves to %q, one of the store's own files", ref, path)
		}
	}
	if err := ValidateName(name); err != nil {
		t.Fatalf("%q is accepted by the API, but the store refuses the image it names: %v", ref, err)
	}
	if got, err := s.Path(name); err != nil || got != path {
		t.Fatalf("the store's path of %q is %q, %v; the API resolved %q", name, got, err, path)
	}
	if got, ok := validation.ImageName(ref, fuzzImageDir); !ok || got != name {
		t.Fatalf("placement names %q %q (%v); the store names it %q", ref, got, ok, name)
	}
	// A node can list it under that name.
	if errs := validation.ValidateNodeImages([]*apiv1.NodeImage{{Name: name}}, field.NewPath("images")); len(errs) > 0 {
		t.Fatalf("a node may not list %q: %v", name, errs)
	}
}

var imageNameSeeds = []string{
	"debian.qcow2", "os/debian-12.qcow2", "vmlinux",
	".hidden.info.json", ".debian.qcow2.info.json", "os/.base.raw.tmp-42", "sub/./x", "./x", "a//b", "a/",
	"..", "../x", "a/../b", "/etc/shadow", fuzzImageDir, fuzzImageDir + "/", fuzzImageDir + "/x",
	fuzzImageDir + "/.x.info.json", fuzzImageDir + "//x", fuzzImageDir + "/./x", fuzzImageDir + "-old/x",
	"a\x00b", "a\nb", "\xff", strings.Repeat("a", 256), strings.Repeat("a/", 2100),
}

func FuzzImageName(f *testing.F) {
	for _, s := range imageNameSeeds {
		f.Add(s)
	}
	f.Fuzz(checkImageRef)
}

// The two names, and the rest of the seeds, through the check
// without fuzzing.
func TestImageNameSeeds(t *testing.T) {
	for _, s := range imageNameSeeds {
		checkImageRef(t, s)
	}
	for _, ref := range []string{".hidden.info.json", "sub/./x"} {
		if errs := validation.ValidateImagePath(ref, field.NewPath("image"), fuzzImageDir); len(errs) == 0 {
			t.Errorf("the API accepts %q", ref)
		}
	}
}

// On a real store: of every file in the directory, the API accepts the
// name only of those List shows as images; a sidecar or an import a crash
// left behind cannot be named as a disk.
func TestAPIAcceptsOnlyTheStoresImages(t *testing.T) {
	s := newStore(t)
	src := filepath.Join(t.TempDir(), "disk.raw")
	makeRaw(t, src, mib, mib)
	ctx := context.Background()
	for _, name := range []string{"disk.raw", "os/debian.raw"} {
		if _, err := s.Import(ctx, name, src, ImportOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// What a crashed import leaves: a temporary file.
	if err := os.WriteFile(filepath.Join(s.Dir(), "os", ".debian.raw"+tempMarker+"123"), []byte("partial"), 0o644); err != nil {
		t.Fatal(err)
	}
	imgs, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, img := range imgs {
		listed[img.Name] = true
	}
	files := storeFiles(t, s)
	if len(files) < 5 {
		t.Fatalf("store files %q: want images, sidecars and a temporary file", files)
	}
	for _, f := range files {
		for _, ref := range []string{f, filepath.Join(s.Dir(), f)} {
			accepted := len(validation.ValidateImagePath(ref, field.NewPath("image"), s.Dir())) == 0
			if accepted != listed[f] {
				t.Errorf("%q: the API accepts it %v, the store lists it as an image %v", ref, accepted, listed[f])
			}
		}
	}
}
