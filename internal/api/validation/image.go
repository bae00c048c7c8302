package validation

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Image pull policies (ImageSpec.nodes).
const (
	// ImageNodesOnDemand pulls an image on a node when an instance placed
	// there needs it.
	ImageNodesOnDemand = ""
	// ImageNodesAll pulls it on every node at once.
	ImageNodesAll = "all"
)

// Phases of one node's pull (ImageNodeStatus.phase).
const (
	ImagePhasePulling = "Pulling"
	ImagePhaseReady   = "Ready"
	ImagePhaseFailed  = "Failed"
)

// Image formats an Image may declare (as qemu-img names them).
const (
	ImageFormatQCOW2 = "qcow2"
	ImageFormatRaw   = "raw"
)

const (
	// maxImageURLLen is what browsers and proxies reliably pass.
	maxImageURLLen = 2048
	// maxImageMessageLen bounds a node's pull message (an error chain).
	maxImageMessageLen = 2048
)

// DefaultImage normalizes what users may write loosely: the checksum in
// upper case, as some sha256sum files and web pages print it.
func DefaultImage(img *apiv1.Image) {
	if img.GetSpec() != nil {
		img.Spec.Sha256 = strings.ToLower(strings.TrimSpace(img.Spec.Sha256))
		if ms := img.Spec.MaxSize; ms != "" && validateDiskSize(ms, nil) == nil {
			img.Spec.MaxSize = mustCanonical(ms)
		}
	}
}

// DefaultImageMaxSize gives an Image that sets no spec.max_size the
// server's default (serve --image-max-size), in bytes.
func DefaultImageMaxSize(img *apiv1.Image, def int64) {
	if img.GetSpec() != nil && img.Spec.MaxSize == "" && def > 0 {
		img.Spec.MaxSize = resource.NewQuantity(def, resource.BinarySI).String()
	}
}

// ValidateImageMaxSize refuses a spec.max_size above the server's cap
// (serve --image-max-size-cap), in bytes. old is nil on create; an update
// that keeps the value passes even when the cap was lowered since, as
// Kubernetes ratchets validation: the Image is not made unchangeable.
func ValidateImageMaxSize(img, old *apiv1.Image, capBytes int64) field.ErrorList {
	ms := img.GetSpec().GetMaxSize()
	n, ok := ByteQuantity(ms)
	if !ok || (old != nil && EqualQuantities(ms, old.GetSpec().GetMaxSize())) || n <= capBytes {
		return nil // a bad quantity is ValidateImage's to report
	}
	c := resource.NewQuantity(capBytes, resource.BinarySI).String()
	return field.ErrorList{field.Invalid(field.NewPath("spec", "max_size"), ms,
		fmt.Sprintf("must be at most %s, the server's cap (serve --image-max-size-cap)", c))}
}

// ByteQuantity is the number of bytes of a quantity that is a whole
// number of bytes between 1 and 1Ei, as disk sizes are; ok is false for
// anything else.
func ByteQuantity(s string) (int64, bool) {
	if validateDiskSize(s, nil) != nil {
		return 0, false
	}
	q, err := parseQuantity(s)
	if err != nil {
		return 0, false
	}
	return q.Value(), true
}

// ValidateImage checks an Image as created or updated. Its name is both
// the object's name and the file name nodes store it under in their image
// directory, so it must be a DNS-1123 subdomain (no '/', it is a key
// segment) and an image name (no leading '.', those are the store's own
// files).
func ValidateImage(img *apiv1.Image) field.ErrorList {
	meta := field.NewPath("metadata")
	errs := ValidateObjectMeta(img.GetMetadata(), false, meta)
	if name := img.GetMetadata().GetName(); name != "" && len(errs) == 0 {
		errs = append(errs, ValidateImageName(name, meta.Child("name"))...)
	}
	spec := field.NewPath("spec")
	if img.GetSpec() == nil {
		return append(errs, field.Required(spec, ""))
	}
	s := img.GetSpec()
	errs = append(errs, validateImageURL(s.GetUrl(), spec.Child("url"))...)
	if sum := s.GetSha256(); sum != "" && !sha256Regexp.MatchString(sum) {
		errs = append(errs, field.Invalid(spec.Child("sha256"), sum, "must be 64 hex digits"))
	}
	errs = append(errs, validateImageFormat(img.GetMetadata().GetName(), s.GetFormat(), spec.Child("format"))...)
	if ms := s.GetMaxSize(); ms != "" {
		errs = append(errs, validateDiskSize(ms, spec.Child("max_size"))...)
	}
	switch s.GetNodes() {
	case ImageNodesOnDemand, ImageNodesAll:
	default:
		errs = append(errs, field.NotSupported(spec.Child("nodes"), s.GetNodes(), []string{ImageNodesOnDemand, ImageNodesAll}))
	}
	return errs
}

// ValidateImageUpdate refuses changes to an Image's source: nodes that
// pulled the old one would silently keep different content under the
// same name. Delete and re-create it instead.
func ValidateImageUpdate(img, old *apiv1.Image) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	errs = append(errs, validateImmutable(img.GetSpec().GetUrl(), old.GetSpec().GetUrl(), spec.Child("url"))...)
	errs = append(errs, validateImmutable(img.GetSpec().GetSha256(), old.GetSpec().GetSha256(), spec.Child("sha256"))...)
	errs = append(errs, validateImmutable(img.GetSpec().GetFormat(), old.GetSpec().GetFormat(), spec.Child("format"))...)
	return errs
}

// ImageUploadURL is the url of an Image made by image upload: its nodes
// pull it from the servers (ImageUploads.Download), and only the upload
// service makes such Images (Images.Create refuses the url).
const ImageUploadURL = "upload:"

// validateImageURL accepts http(s) URLs with a host and file URLs with an
// absolute, clean path. Credentials in the URL are refused: every node
// and every reader of the object would see them.
func validateImageURL(s string, path *field.Path) field.ErrorList {
	if s == "" {
		return field.ErrorList{field.Required(path, "https://, http:// or file:// URL of the image")}
	}
	if errs := validatePrintable(s, maxImageURLLen, path, false); len(errs) > 0 {
		return errs
	}
	if s == ImageUploadURL {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil {
		return field.ErrorList{field.Invalid(path, s, err.Error())}
	}
	switch u.Scheme {
	case "https", "http":
		if u.Host == "" || u.Hostname() == "" {
			return field.ErrorList{field.Invalid(path, s, "must name a host")}
		}
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return field.ErrorList{field.Invalid(path, s, "a file URL names a path on each node: file:///path")}
		}
		if !filepath.IsAbs(u.Path) || filepath.Clean(u.Path) != u.Path {
			return field.ErrorList{field.Invalid(path, s, "must be an absolute path in clean form")}
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return field.ErrorList{field.Invalid(path, s, "a file URL has no query or fragment")}
		}
	default:
		return field.ErrorList{field.NotSupported(path.Child("scheme"), u.Scheme, []string{"https", "http", "file"})}
	}
	if u.User != nil {
		return field.ErrorList{field.Invalid(path, RedactURL(s), "must not carry credentials: every node and reader of the Image sees its URL")}
	}
	return nil
}

// validateImageFormat checks the declared format against the name's
// extension, the same rule the image store applies to imports.
func validateImageFormat(name, format string, path *field.Path) field.ErrorList {
	switch format {
	case "", ImageFormatQCOW2, ImageFormatRaw:
	default:
		return field.ErrorList{field.NotSupported(path, format, []string{ImageFormatQCOW2, ImageFormatRaw})}
	}
	ext := strings.TrimPrefix(strings.ToLower(filepath.Ext(name)), ".")
	if format != "" && (ext == ImageFormatQCOW2 || ext == ImageFormatRaw) && ext != format {
		return field.ErrorList{field.Invalid(path, format, fmt.Sprintf("contradicts the name's extension .%s", ext))}
	}
	return nil
}

// RedactURL hides a URL's password, for messages.
func RedactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "<unparsable URL>"
	}
	return u.Redacted()
}

// ValidateImageNodeStatus checks one node's report of its pull of an
// image.
func ValidateImageNodeStatus(st *apiv1.ImageNodeStatus, path *field.Path) field.ErrorList {
	if st == nil {
		return field.ErrorList{field.Required(path, "")}
	}
	errs := ValidateNodeName(st.GetNode(), path.Child("node"))
	switch st.GetPhase() {
	case ImagePhasePulling, ImagePhaseReady, ImagePhaseFailed:
	default:
		errs = append(errs, field.NotSupported(path.Child("phase"), st.GetPhase(), []string{ImagePhasePulling, ImagePhaseReady, ImagePhaseFailed}))
	}
	for _, n := range []struct {
		name string
		v    int64
	}{
		{"bytes_done", st.GetBytesDone()}, {"bytes_total", st.GetBytesTotal()}, {"bytes_per_second", st.GetBytesPerSecond()},
		{"eta_seconds", st.GetEtaSeconds()}, {"virtual_size_bytes", st.GetVirtualSizeBytes()}, {"size_bytes", st.GetSizeBytes()},
		{"attempts", int64(st.GetAttempts())},
	} {
		if n.v < 0 {
			errs = append(errs, field.Invalid(path.Child(n.name), n.v, "must not be negative"))
		}
	}
	errs = append(errs, validatePrintable(st.GetMessage(), maxImageMessageLen, path.Child("message"), true)...)
	if s := st.GetSha256(); s != "" && !sha256Regexp.MatchString(s) {
		errs = append(errs, field.Invalid(path.Child("sha256"), s, "must be 64 lowercase hex digits"))
	}
	if f := st.GetFormat(); f != "" && f != ImageFormatQCOW2 && f != ImageFormatRaw {
		errs = append(errs, field.NotSupported(path.Child("format"), f, []string{ImageFormatQCOW2, ImageFormatRaw}))
	}
	if uid := st.GetImageUid(); uid != "" {
		errs = append(errs, ValidateUID(uid, path.Child("image_uid"))...)
	}
	return errs
}

// ImageRefs returns the image names spec refers to, as nodes list them,
// sorted: image volumes, kernel and initrd, and (withPersistent) the
// images persistent volumes are copied from. imageDir maps absolute
// references (may be empty: then they are left out).
func ImageRefs(spec *apiv1.VirtualMachineInstanceSpec, imageDir string, withPersistent bool) []string {
	kb := spec.GetDomain().GetFirmware().GetKernelBoot()
	refs := []string{kb.GetKernel(), kb.GetInitrd()}
	for _, v := range spec.GetVolumes() {
		refs = append(refs, v.GetImage().GetName())
		if withPersistent {
			refs = append(refs, v.GetPersistent().GetImage())
		}
	}
	var out []string
	for _, ref := range refs {
		if name, ok := ImageName(ref, imageDir); ok && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
