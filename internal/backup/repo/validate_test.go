package repo

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

const (
	testID    = "6f1c2a3e-0000-4000-8000-000000000001"
	testVMUID = "6f1c2a3e-0000-4000-8000-0000000000aa"
)

func validManifest() *Manifest {
	h := strings.Repeat("ab", 32)
	return &Manifest{
		Format: FormatVersion, ID: testID, Cluster: "prod-1", VMNamespace: "default", VMName: "web", VMUID: testVMUID,
		Created: time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC),
		Labels:  map[string]string{"virtplane.io/schedule": "nightly"},
		Spec:    json.RawMessage(`{"metadata":{"name":"web"}}`),
		Volumes: []Volume{{
			Name: "data", StorageClass: "local", ClassKind: ClassKindLocal,
			SizeBytes: 3*DefaultChunkSize + 1, ChunkSize: DefaultChunkSize, Chunks: []string{h, "", h, ""},
		}},
	}
}

// Whatever a target holds is checked field by field before it is used,
// and the error names the field.
func TestValidateManifestRefusesHostileInput(t *testing.T) {
	if err := ValidateManifest(validManifest()); err != nil {
		t.Fatalf("valid manifest: %v", err)
	}
	for name, tc := range map[string]struct {
		mutate func(m *Manifest)
		field  string
	}{
		"nil-like format":       {func(m *Manifest) { m.Format = 0 }, "format"},
		"future format":         {func(m *Manifest) { m.Format = 2 }, "format"},
		"id not a uuid":         {func(m *Manifest) { m.ID = "../../etc/passwd" }, "id"},
		"id upper case":         {func(m *Manifest) { m.ID = strings.ToUpper(testID) }, "id"},
		"vm uid a path":         {func(m *Manifest) { m.VMUID = "a/b" }, "vmUID"},
		"vm name empty":         {func(m *Manifest) { m.VMName = "" }, "vmName"},
		"vm name not a label":   {func(m *Manifest) { m.VMName = "Web_1" }, "vmName"},
		"namespace with slash":  {func(m *Manifest) { m.VMNamespace = "a/b" }, "vmNamespace"},
		"cluster with spaces":   {func(m *Manifest) { m.Cluster = "a b" }, "cluster"},
		"created zero":          {func(m *Manifest) { m.Created = time.Time{} }, "created"},
		"label key bad":         {func(m *Manifest) { m.Labels = map[string]string{"a b": "c"} }, "labels"},
		"label value bad":       {func(m *Manifest) { m.Labels = map[string]string{"a": strings.Repeat("x", 64)} }, "labels[a]"},
		"spec not an object":    {func(m *Manifest) { m.Spec = json.RawMessage(`[1]`) }, "spec"},
		"spec too big":          {func(m *Manifest) { m.Spec = json.RawMessage(`"` + strings.Repeat("x", MaxSpecBytes) + `"`) }, "spec"},
		"too many volumes":      {func(m *Manifest) { m.Volumes = make([]Volume, MaxVolumes+1) }, "volumes"},
		"duplicate volume":      {func(m *Manifest) { m.Volumes = append(m.Volumes, m.Volumes[0]) }, "volumes[1].name"},
		"volume name a path":    {func(m *Manifest) { m.Volumes[0].Name = "../x" }, "volumes[0].name"},
		"class name bad":        {func(m *Manifest) { m.Volumes[0].StorageClass = "A/B" }, "volumes[0].storageClass"},
		"class kind unknown":    {func(m *Manifest) { m.Volumes[0].ClassKind = "nfs" }, "volumes[0].classKind"},
		"chunk size zero":       {func(m *Manifest) { m.Volumes[0].ChunkSize = 0 }, "volumes[0].chunkSize"},
		"chunk size not pow2":   {func(m *Manifest) { m.Volumes[0].ChunkSize = 3 << 20 }, "volumes[0].chunkSize"},
		"chunk size too small":  {func(m *Manifest) { m.Volumes[0].ChunkSize = 32 << 10 }, "volumes[0].chunkSize"},
		"chunk size too big":    {func(m *Manifest) { m.Volumes[0].ChunkSize = 128 << 20 }, "volumes[0].chunkSize"},
		"size zero":             {func(m *Manifest) { m.Volumes[0].SizeBytes = 0 }, "volumes[0].sizeBytes"},
		"size negative":         {func(m *Manifest) { m.Volumes[0].SizeBytes = -1 }, "volumes[0].sizeBytes"},
		"size huge":             {func(m *Manifest) { m.Volumes[0].SizeBytes = MaxVolumeBytes + 1 }, "volumes[0].sizeBytes"},
		"too few chunks":        {func(m *Manifest) { m.Volumes[0].Chunks = m.Volumes[0].Chunks[:3] }, "volumes[0].chunks"},
		"too many chunks":       {func(m *Manifest) { m.Volumes[0].Chunks = append(m.Volumes[0].Chunks, "") }, "volumes[0].chunks"},
		"chunk not hex":         {func(m *Manifest) { m.Volumes[0].Chunks[0] = strings.Repeat("zz", 32) }, "volumes[0].chunks[0]"},
		"chunk upper hex":       {func(m *Manifest) { m.Volumes[0].Chunks[0] = strings.Repeat("AB", 32) }, "volumes[0].chunks[0]"},
		"chunk a path":          {func(m *Manifest) { m.Volumes[0].Chunks[2] = "../../../../etc/passwd" }, "volumes[0].chunks[2]"},
		"chunk short":           {func(m *Manifest) { m.Volumes[0].Chunks[0] = "abcd" }, "volumes[0].chunks[0]"},
		"parent not a uuid":     {func(m *Manifest) { m.Volumes[0].Parent = "x" }, "volumes[0].parent"},
		"parent is itself":      {func(m *Manifest) { m.Volumes[0].Parent = testID }, "volumes[0].parent"},
		"snapshot with a space": {func(m *Manifest) { m.Volumes[0].Snapshot = "a b" }, "volumes[0].snapshot"},
		"snapshot an option":    {func(m *Manifest) { m.Volumes[0].Snapshot = "--x=y" }, "volumes[0].snapshot"},
	} {
		t.Run(name, func(t *testing.T) {
			m := validManifest()
			tc.mutate(m)
			err := ValidateManifest(m)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tc.field+":") {
				t.Errorf("error %q does not name %s", err, tc.field)
			}
		})
	}
}

func TestChunkCountBounds(t *testing.T) {
	m := validManifest()
	m.Volumes[0].SizeBytes = MaxVolumeBytes
	m.Volumes[0].ChunkSize = MinChunkSize // 2^34 chunks: refused before the list is looked at
	if err := ValidateManifest(m); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("a volume of 2^34 chunks: %v", err)
	}
}
