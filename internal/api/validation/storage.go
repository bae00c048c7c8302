package validation

import (
	"encoding/base64"
	"encoding/binary"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// StorageClassLocal is the built-in class (apiv1.StorageClassLocal).
const StorageClassLocal = apiv1.StorageClassLocal

// Bounds of a storage class.
const (
	MaxRBDMonitors = 16
	// MaxSharedPathLen bounds a shared filesystem's mount path, which
	// every volume's path on the nodes starts with.
	MaxSharedPathLen = 256
	// MaxNodeStorage bounds the classes a node reports.
	MaxNodeStorage = 64
	// maxNodeStorageMessage bounds what a node says about one class.
	maxNodeStorageMessage = 1024
)

var (
	// Ceph allows more in pool and user names; these are the characters
	// that can never be taken for a separator of an rbd image spec
	// (pool/image@snap), of QEMU's rbd: filename syntax (':'), or of a
	// ceph.conf line.
	rbdPoolRegexp = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$`)
	rbdUserRegexp = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)
	// sharedPathRegexp: what a mount path may hold. The path goes into
	// domain XML (typed, escaped) and QEMU's options, and becomes the
	// root of files the node agent makes and removes; an allow-list keeps
	// ',' and ':' (QEMU option syntax) and anything exotic out.
	sharedPathRegexp = regexp.MustCompile(`^(/[A-Za-z0-9._-]+)+$`)
)

// UsesLocalStorage says whether a persistent volume is on the built-in
// local class, which pins its VM to the node that made it.
func UsesLocalStorage(pv *apiv1.PersistentVolume) bool { return pv.IsLocal() }

// StorageClassOf names the class a persistent volume is on, "local" for
// none.
func StorageClassOf(pv *apiv1.PersistentVolume) string {
	if UsesLocalStorage(pv) {
		return StorageClassLocal
	}
	return pv.GetStorageClass()
}

// ValidateStorageClass checks a StorageClass as created (requireKey) or
// updated (an rbd key may be left empty to keep the stored one).
func ValidateStorageClass(sc *apiv1.StorageClass, requireKey bool) field.ErrorList {
	meta := field.NewPath("metadata")
	errs := ValidateObjectMeta(sc.GetMetadata(), false, meta)
	if name := sc.GetMetadata().GetName(); name != "" {
		// A label, not a subdomain: the name is a directory on the nodes.
		errs = append(errs, dns1123Label(name, meta.Child("name"))...)
		if name == StorageClassLocal {
			errs = append(errs, field.Invalid(meta.Child("name"), name, "local is the built-in class of files on the node; choose another name"))
		}
	}
	spec := field.NewPath("spec")
	s := sc.GetSpec()
	if s == nil {
		return append(errs, field.Required(spec, ""))
	}
	errs = append(errs, validateLabels(s.GetNodeSelector(), spec.Child("node_selector"))...)
	switch {
	case s.GetRbd() != nil && s.GetSharedFilesystem() != nil:
		errs = append(errs, field.Invalid(spec, "rbd, shared_filesystem", "set exactly one of rbd and shared_filesystem"))
	case s.GetRbd() != nil:
		errs = append(errs, validateRBD(s.GetRbd(), spec.Child("rbd"), requireKey)...)
	case s.GetSharedFilesystem() != nil:
		errs = append(errs, ValidateSharedPath(s.GetSharedFilesystem().GetPath(), spec.Child("shared_filesystem", "path"))...)
	default:
		errs = append(errs, field.Required(spec, "set exactly one of rbd and shared_filesystem"))
	}
	return errs
}

// ValidateStorageClassUpdate refuses changes of where the volumes are: a
// class's kind, rbd pool and filesystem path. Volumes made there would be
// looked for somewhere else.
func ValidateStorageClassUpdate(sc, old *apiv1.StorageClass) field.ErrorList {
	spec := field.NewPath("spec")
	n, o := sc.GetSpec(), old.GetSpec()
	if (n.GetRbd() != nil) != (o.GetRbd() != nil) {
		return field.ErrorList{field.Invalid(spec, kindOfClass(sc), "the kind of a storage class is immutable (it is "+kindOfClass(old)+")")}
	}
	var errs field.ErrorList
	errs = append(errs, validateImmutable(n.GetRbd().GetPool(), o.GetRbd().GetPool(), spec.Child("rbd", "pool"))...)
	errs = append(errs, validateImmutable(n.GetSharedFilesystem().GetPath(), o.GetSharedFilesystem().GetPath(), spec.Child("shared_filesystem", "path"))...)
	return errs
}

func kindOfClass(sc *apiv1.StorageClass) string {
	if sc.GetSpec().GetRbd() != nil {
		return "rbd"
	}
	return "shared_filesystem"
}

func validateRBD(r *apiv1.RBDStorage, path *field.Path, requireKey bool) field.ErrorList {
	var errs field.ErrorList
	mons := r.GetMonitors()
	switch {
	case len(mons) == 0:
		errs = append(errs, field.Required(path.Child("monitors"), "at least one monitor, IP:port"))
	case len(mons) > MaxRBDMonitors:
		errs = append(errs, field.TooMany(path.Child("monitors"), len(mons), MaxRBDMonitors))
	default:
		seen := map[string]bool{}
		for i, m := range mons {
			p := path.Child("monitors").Index(i)
			if err := ValidateMonitor(m); err != "" {
				errs = append(errs, field.Invalid(p, m, err))
			} else if seen[m] {
				errs = append(errs, field.Duplicate(p, m))
			}
			seen[m] = true
		}
	}
	if !rbdPoolRegexp.MatchString(r.GetPool()) {
		errs = append(errs, field.Invalid(path.Child("pool"), r.GetPool(), "must be 1-100 letters, digits, '_', '.' or '-', starting with a letter or digit"))
	}
	if u := r.GetUser(); !rbdUserRegexp.MatchString(u) {
		errs = append(errs, field.Invalid(path.Child("user"), u, "must be 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit (the cephx name without \"client.\")"))
	} else if len(u) > len("client.") && u[:len("client.")] == "client." {
		errs = append(errs, field.Invalid(path.Child("user"), u, "give the name without \"client.\""))
	}
	switch k := r.GetKey(); {
	case k == "" && requireKey:
		errs = append(errs, field.Required(path.Child("key"), "the user's cephx key, as `ceph auth get-key client.USER` prints it"))
	case k != "":
		if msg := checkCephxKey(k); msg != "" {
			// The value is a secret: never echoed back.
			errs = append(errs, field.Invalid(path.Child("key"), "(hidden)", msg))
		}
	}
	return errs
}

// ValidateMonitor checks a monitor address: an IP literal and a port,
// spelt as netip spells it ("10.0.0.1:3300", "[fd00::1]:3300"), unicast.
// It returns what is wrong, or "".
func ValidateMonitor(s string) string {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return "must be IP:port (an IP literal, [IPv6]:port for IPv6)"
	}
	if ap.String() != s {
		return "must be spelt " + ap.String()
	}
	a := ap.Addr()
	if ap.Port() == 0 || a.IsUnspecified() || a.IsMulticast() || a.Zone() != "" {
		return "must be a unicast IP and a port other than 0"
	}
	return ""
}

// checkCephxKey checks the shape of a cephx key as Ceph encodes it:
// base64 of a 28-byte blob, a little-endian u16 type (1, AES), 8 bytes of
// creation time, a u16 length (16) and the 16-byte secret.
func checkCephxKey(k string) string {
	const bad = "must be a cephx key as `ceph auth get-key` prints it (base64 of 28 bytes, an AES secret)"
	b, err := base64.StdEncoding.Strict().DecodeString(k)
	if err != nil || len(b) != 28 {
		return bad
	}
	if binary.LittleEndian.Uint16(b[0:2]) != 1 || binary.LittleEndian.Uint16(b[10:12]) != 16 {
		return bad
	}
	return ""
}

// ValidateSharedPath checks a shared filesystem's mount path: absolute,
// clean, not "/", of the allowed characters and length.
func ValidateSharedPath(p string, path *field.Path) field.ErrorList {
	switch {
	case p == "":
		return field.ErrorList{field.Required(path, "the absolute path the filesystem is mounted at on every node")}
	case len(p) > MaxSharedPathLen:
		return field.ErrorList{field.TooLong(path, "", MaxSharedPathLen)}
	case !sharedPathRegexp.MatchString(p) || filepath.Clean(p) != p:
		return field.ErrorList{field.Invalid(path, p, "must be an absolute, clean path of letters, digits, '.', '_', '-' and '/', not /")}
	}
	return nil
}

// ValidateNodeStorage checks a node's report of its storage classes: each
// class once, sorted, a short message, an IP literal as address.
func ValidateNodeStorage(items []*apiv1.NodeStorage, path *field.Path) field.ErrorList {
	if len(items) > MaxNodeStorage {
		return field.ErrorList{field.TooMany(path, len(items), MaxNodeStorage)}
	}
	var errs field.ErrorList
	prev := ""
	for i, it := range items {
		p := path.Index(i)
		name := it.GetClass()
		if nerrs := dns1123Label(name, p.Child("class")); len(nerrs) > 0 {
			errs = append(errs, nerrs...)
		} else if i > 0 && name <= prev {
			errs = append(errs, field.Invalid(p.Child("class"), name, "classes must be sorted, each once"))
		}
		prev = name
		if len(it.GetMessage()) > maxNodeStorageMessage {
			errs = append(errs, field.TooLong(p.Child("message"), "", maxNodeStorageMessage))
		}
		if a := it.GetAddress(); a != "" {
			if ip, err := netip.ParseAddr(a); err != nil || ip.String() != a || ip.Zone() != "" {
				errs = append(errs, field.Invalid(p.Child("address"), a, "must be an IP literal"))
			}
		}
	}
	return errs
}

// StorageClassRefs lists the storage classes (not local) the persistent
// volumes of spec are on, each once.
func StorageClassRefs(spec *apiv1.VirtualMachineInstanceSpec) []string {
	var out []string
	for _, v := range spec.GetVolumes() {
		pv := v.GetPersistent()
		if pv == nil || UsesLocalStorage(pv) {
			continue
		}
		if c := pv.GetStorageClass(); !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}
