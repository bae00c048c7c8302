package validation

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// MaxNodeImages bounds a node's image list. The list is stored in the Node
// object, which etcd takes in one request of at most 1.5 MiB; node agents
// report no more than this many images.
const MaxNodeImages = 1000

// MaxNodeImageListBytes bounds the encoded size of a node's image list,
// for the same reason: a thousand images with names near PATH_MAX would
// not fit in a Node. Node agents cut their list short at this size.
const MaxNodeImageListBytes = 512 << 10

// nodeImageFormats are the formats of images a node may list: those the
// image store takes as base images (imagestore.FormatQCOW2, FormatRaw).
var nodeImageFormats = []string{"qcow2", "raw"}

var sha256Regexp = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ValidateNodeImages checks an image list a node agent reports: names are
// what placement compares volume references with, so they must be image
// names (ValidateImageName) and unique.
func ValidateNodeImages(images []*apiv1.NodeImage, path *field.Path) field.ErrorList {
	if len(images) > MaxNodeImages {
		return field.ErrorList{field.TooMany(path, len(images), MaxNodeImages)}
	}
	if n := NodeImageListSize(images); n > MaxNodeImageListBytes {
		e := field.TooLong(path, "", MaxNodeImageListBytes)
		e.Detail = fmt.Sprintf("the list encodes to %d bytes, more than the %d allowed", n, MaxNodeImageListBytes)
		return field.ErrorList{e}
	}
	var errs field.ErrorList
	seen := map[string]bool{}
	for i, img := range images {
		p := path.Index(i)
		name := img.GetName()
		if nerrs := ValidateImageName(name, p.Child("name")); len(nerrs) > 0 {
			errs = append(errs, nerrs...)
		} else if seen[name] {
			errs = append(errs, field.Duplicate(p.Child("name"), name))
		}
		seen[name] = true
		if v := img.GetVirtualSizeBytes(); v < 0 {
			errs = append(errs, field.Invalid(p.Child("virtual_size_bytes"), v, "must not be negative"))
		}
		if v := img.GetSizeBytes(); v < 0 {
			errs = append(errs, field.Invalid(p.Child("size_bytes"), v, "must not be negative"))
		}
		if f := img.GetFormat(); f != "" {
			errs = append(errs, oneOf(f, p.Child("format"), nodeImageFormats)...)
		}
		if s := img.GetSha256(); s != "" && !sha256Regexp.MatchString(s) {
			errs = append(errs, field.Invalid(p.Child("sha256"), s, "must be 64 lowercase hex digits"))
		}
	}
	return errs
}

// NodeImageListSize is the encoded size of an image list, as
// MaxNodeImageListBytes counts it.
func NodeImageListSize(images []*apiv1.NodeImage) int {
	return proto.Size(&apiv1.NodeImageList{Items: images})
}

// ImageName returns the name under which nodes list the image that
// reference ref (an image volume, persistent.image, kernel or initrd)
// names: its path relative to the node image directory, in clean form.
// An absolute ref is mapped through imageDir; ok is false when it cannot
// be (imageDir unknown, or ref outside it) or ref names no file.
func ImageName(ref, imageDir string) (name string, ok bool) {
	if ref == "" {
		return "", false
	}
	c := filepath.Clean(ref)
	if filepath.IsAbs(c) {
		prefix, ok := imageDirPrefix(imageDir)
		if !ok || !strings.HasPrefix(c, prefix) {
			return "", false
		}
		c = strings.TrimPrefix(c, prefix)
	}
	if c == "." || c == "" || c == ".." || strings.HasPrefix(c, "../") {
		return "", false
	}
	return c, true
}

// ImageSizes maps image names to the largest virtual size, in bytes, any
// node reports for them.
type ImageSizes map[string]int64

// NodeImageSizes collects the image lists of nodes.
func NodeImageSizes(nodes []*apiv1.Node) ImageSizes {
	sizes := ImageSizes{}
	for _, n := range nodes {
		for _, img := range n.GetStatus().GetImages() {
			if v, ok := sizes[img.GetName()]; !ok || img.GetVirtualSizeBytes() > v {
				sizes[img.GetName()] = img.GetVirtualSizeBytes()
			}
		}
	}
	return sizes
}

// persistentImageVolume is a persistent volume made from an image that
// needs checking against the image's size.
type persistentImageVolume struct {
	index int
	image string // as nodes list it
	size  string
}

// persistentImageVolumes lists spec's persistent volumes made from an
// image, except those oldSpec (may be nil) already had unchanged: the disk
// of such a volume may exist already, and an update that does not touch
// it must not be refused because a node since reported a larger image of
// that name. Images named by a path ImageName cannot map are left out.
func persistentImageVolumes(spec, oldSpec *apiv1.VirtualMachineInstanceSpec, imageDir string) []persistentImageVolume {
	old := map[string]*apiv1.PersistentVolume{}
	for _, v := range oldSpec.GetVolumes() {
		if pv := v.GetPersistent(); pv != nil {
			old[v.GetName()] = pv
		}
	}
	var out []persistentImageVolume
	for i, v := range spec.GetVolumes() {
		pv := v.GetPersistent()
		if pv.GetImage() == "" {
			continue
		}
		if o, ok := old[v.GetName()]; ok && proto.Equal(o, pv) {
			continue
		}
		if name, ok := ImageName(pv.GetImage(), imageDir); ok {
			out = append(out, persistentImageVolume{index: i, image: name, size: pv.GetSize()})
		}
	}
	return out
}

// NeedsImageSizes reports whether ValidatePersistentImageSizes has
// anything to check, so callers read node image lists only then.
func NeedsImageSizes(spec, oldSpec *apiv1.VirtualMachineInstanceSpec, imageDir string) bool {
	return len(persistentImageVolumes(spec, oldSpec, imageDir)) > 0
}

// ValidatePersistentImageSizes checks that every persistent volume made
// from an image is at least the image's virtual size, the largest any node
// reports: the disk is a copy of the image grown to size, and it cannot
// shrink below what the image holds. An image no node reports is not
// checked here; the node that creates the disk says whether it exists.
// spec must have passed validation (sizes parse); path is the spec's.
func ValidatePersistentImageSizes(spec, oldSpec *apiv1.VirtualMachineInstanceSpec, path *field.Path, sizes ImageSizes, imageDir string) field.ErrorList {
	var errs field.ErrorList
	for _, v := range persistentImageVolumes(spec, oldSpec, imageDir) {
		vsize, ok := sizes[v.image]
		if !ok {
			continue
		}
		q, err := parseQuantity(v.size)
		if err != nil || q.Cmp(*resource.NewQuantity(vsize, resource.BinarySI)) >= 0 {
			continue // a bad size is validateDiskSize's to report
		}
		errs = append(errs, field.Invalid(path.Child("volumes").Index(v.index).Child("persistent", "size"), v.size,
			fmt.Sprintf("must be at least the virtual size of image %q (%d bytes / %s)", v.image, vsize, byteQuantity(vsize))))
	}
	return errs
}

// byteQuantity renders n bytes as a quantity a user can write as the size:
// exact when n is whole MiB, else rounded up to the next MiB (and said so).
func byteQuantity(n int64) string {
	const mi = 1 << 20
	if n%mi == 0 {
		return resource.NewQuantity(n, resource.BinarySI).String()
	}
	return resource.NewQuantity((n/mi+1)*mi, resource.BinarySI).String() + " rounded up"
}
