package repo

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	utilvalidation "k8s.io/apimachinery/pkg/util/validation"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// Bounds of what a manifest may hold. A manifest is read back from a
// target, so each is a limit on what a hostile one can make a reader
// allocate or do, set far above what real backups need.
const (
	// MaxManifestBytes bounds a manifest object: 4 million chunk names
	// (16 TiB of volumes at 4 MiB a chunk) fit.
	MaxManifestBytes = 256 << 20
	// MaxVolumes bounds the volumes of one backup (a VM's disks).
	MaxVolumes = 256
	// MaxVolumeBytes bounds a volume's size: 1 PiB.
	MaxVolumeBytes = 1 << 50
	// MaxChunks bounds the chunks of one volume.
	MaxChunks = 1 << 24
	// MaxSpecBytes bounds the VM spec a manifest carries (the API's
	// objects are far smaller: etcd's request limit is 1.5 MiB).
	MaxSpecBytes = 4 << 20
	// MaxLabels bounds a manifest's labels, as the API bounds an object's.
	MaxLabels = 64
	// maxSnapshotName bounds Volume.Snapshot.
	maxSnapshotName = 128
)

// ValidateManifest checks every field of m against the rules a manifest
// read back from a target must meet before anything acts on it: the id
// and uids are UUIDs, names follow the API's rules, each volume's chunk
// list matches its size and chunk size, and chunk names are hashes.
// Errors name the field ("volumes[1].chunks[7]").
func ValidateManifest(m *Manifest) error {
	if m == nil {
		return fmt.Errorf("manifest: missing")
	}
	var errs []string
	bad := func(field, format string, args ...any) {
		errs = append(errs, field+": "+fmt.Sprintf(format, args...))
	}
	if m.Format != FormatVersion {
		bad("format", "%d is not the supported format %d", m.Format, FormatVersion)
	}
	if err := validation.CheckUID(m.ID); err != nil {
		bad("id", "%v", err)
	}
	if m.Cluster != "" {
		for _, msg := range utilvalidation.IsValidLabelValue(m.Cluster) {
			bad("cluster", "%q: %s", clip(m.Cluster), msg)
		}
	}
	if m.VMNamespace != "" {
		for _, msg := range utilvalidation.IsDNS1123Label(m.VMNamespace) {
			bad("vmNamespace", "%q: %s", clip(m.VMNamespace), msg)
		}
	}
	if m.VMName == "" {
		bad("vmName", "required")
	}
	for _, msg := range utilvalidation.IsDNS1123Label(m.VMName) {
		bad("vmName", "%q: %s", clip(m.VMName), msg)
	}
	if err := validation.CheckUID(m.VMUID); err != nil {
		bad("vmUID", "%v", err)
	}
	if m.Created.IsZero() {
		bad("created", "required")
	}
	if len(m.Labels) > MaxLabels {
		bad("labels", "%d labels, at most %d", len(m.Labels), MaxLabels)
	} else {
		for k, v := range m.Labels {
			for _, msg := range utilvalidation.IsQualifiedName(k) {
				bad("labels", "key %q: %s", clip(k), msg)
			}
			for _, msg := range utilvalidation.IsValidLabelValue(v) {
				bad("labels["+clip(k)+"]", "%q: %s", clip(v), msg)
			}
		}
	}
	switch {
	case len(m.Spec) > MaxSpecBytes:
		bad("spec", "%d bytes, at most %d", len(m.Spec), MaxSpecBytes)
	case len(m.Spec) > 0 && (!json.Valid(m.Spec) || m.Spec[0] != '{'):
		bad("spec", "not a JSON object")
	}
	switch {
	case len(m.Volumes) > MaxVolumes:
		bad("volumes", "%d volumes, at most %d", len(m.Volumes), MaxVolumes)
	default:
		names := map[string]bool{}
		for i := range m.Volumes {
			p := fmt.Sprintf("volumes[%d]", i)
			v := &m.Volumes[i]
			errs = append(errs, validateVolume(v, p)...)
			if names[v.Name] {
				bad(p+".name", "%q is not unique", clip(v.Name))
			}
			names[v.Name] = true
			if v.Parent == m.ID && m.ID != "" {
				bad(p+".parent", "is the manifest itself")
			}
		}
	}
	if len(errs) > 0 {
		if len(errs) > 10 {
			errs = append(errs[:10], fmt.Sprintf("and %d more", len(errs)-10))
		}
		return fmt.Errorf("invalid manifest: %s", strings.Join(errs, "; "))
	}
	return nil
}

// ValidateVolume checks one volume (as ValidateManifest does), so that a
// base handed to a write is held to the same rules.
func ValidateVolume(v *Volume) error {
	if errs := validateVolume(v, "volume"); len(errs) > 0 {
		return fmt.Errorf("invalid volume: %s", strings.Join(errs, "; "))
	}
	return nil
}

var classKinds = []string{ClassKindLocal, ClassKindRBD, ClassKindSharedFilesystem}

func validateVolume(v *Volume, p string) []string {
	var errs []string
	bad := func(field, format string, args ...any) {
		errs = append(errs, p+"."+field+": "+fmt.Sprintf(format, args...))
	}
	if v.Name == "" {
		bad("name", "required")
	}
	for _, msg := range utilvalidation.IsDNS1123Label(v.Name) {
		bad("name", "%q: %s", clip(v.Name), msg)
	}
	if v.StorageClass != "" {
		for _, msg := range utilvalidation.IsDNS1123Label(v.StorageClass) {
			bad("storageClass", "%q: %s", clip(v.StorageClass), msg)
		}
	}
	if v.ClassKind != "" && !slices.Contains(classKinds, v.ClassKind) {
		bad("classKind", "%q is not one of %s", clip(v.ClassKind), strings.Join(classKinds, ", "))
	}
	if v.Snapshot != "" && !isSnapshotName(v.Snapshot) {
		bad("snapshot", "%q: 1 to %d of [A-Za-z0-9._-], starting with a letter or digit", clip(v.Snapshot), maxSnapshotName)
	}
	if v.Parent != "" {
		if err := validation.CheckUID(v.Parent); err != nil {
			bad("parent", "%v", err)
		}
	}
	return append(errs, validateGeometry(v, p)...)
}

// checkGeometry checks what a write on a base or a restore relies on:
// the size, the chunk size and the chunk names, not the volume's names
// (a Volume fresh from a write has none yet).
func checkGeometry(v *Volume) error {
	if v == nil {
		return errors.New("no volume")
	}
	if errs := validateGeometry(v, "volume"); len(errs) > 0 {
		return fmt.Errorf("invalid volume: %s", strings.Join(errs, "; "))
	}
	return nil
}

func validateGeometry(v *Volume, p string) []string {
	var errs []string
	bad := func(field, format string, args ...any) {
		errs = append(errs, p+"."+field+": "+fmt.Sprintf(format, args...))
	}
	if err := CheckChunkSize(v.ChunkSize); err != nil {
		bad("chunkSize", "%v", err)
		return errs
	}
	if v.SizeBytes <= 0 || v.SizeBytes > MaxVolumeBytes {
		bad("sizeBytes", "%d is not in [1, %d]", v.SizeBytes, int64(MaxVolumeBytes))
		return errs
	}
	n := chunkCount(v.SizeBytes, v.ChunkSize)
	if n > MaxChunks {
		bad("chunks", "%d chunks of %d bytes, at most %d", n, v.ChunkSize, MaxChunks)
		return errs
	}
	if int64(len(v.Chunks)) != n {
		bad("chunks", "%d chunks, but %d bytes in chunks of %d need %d", len(v.Chunks), v.SizeBytes, v.ChunkSize, n)
	}
	nbad := 0
	for i, c := range v.Chunks {
		if c != "" && !isHash(c) {
			if nbad++; nbad <= 3 {
				bad(fmt.Sprintf("chunks[%d]", i), "%q is not a sha256 of 64 lowercase hex digits or \"\"", clip(c))
			}
		}
	}
	return errs
}

// CheckChunkSize is the rule of a chunk size: a power of two in
// [MinChunkSize, MaxChunkSize].
func CheckChunkSize(cs int64) error {
	if cs < MinChunkSize || cs > MaxChunkSize || cs&(cs-1) != 0 {
		return fmt.Errorf("%d is not a power of two in [%d, %d]", cs, MinChunkSize, MaxChunkSize)
	}
	return nil
}

func chunkCount(size, cs int64) int64 { return (size + cs - 1) / cs }

// chunkLen is the length of chunk i of a volume: ChunkSize, but the last
// one may be shorter.
func chunkLen(size, cs int64, i int) int64 {
	return min(cs, size-int64(i)*cs)
}

func isHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func isSnapshotName(s string) bool {
	if s == "" || len(s) > maxSnapshotName {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || c != '.' && c != '_' && c != '-') {
			return false
		}
	}
	return true
}
