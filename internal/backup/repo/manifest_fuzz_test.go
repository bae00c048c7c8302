package repo

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeManifest: whatever bytes a target holds under a manifest's
// key (with a matching checksum: anyone who can write the target can
// compute one), decoding never panics, and what it accepts is a manifest
// every reader may act on: it validates, its chunk lists match their
// volumes' sizes, and it encodes and decodes to itself.
func FuzzDecodeManifest(f *testing.F) {
	good, err := json.Marshal(validManifest())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"format":1,"id":"` + testID + `"}`))
	f.Add([]byte(`{"format":1,"id":"` + testID + `","volumes":[{"sizeBytes":1,"chunkSize":65536,"chunks":["../x"]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := decodeManifest(data, testID)
		if err != nil {
			return
		}
		if err := ValidateManifest(m); err != nil {
			t.Fatalf("accepted a manifest that does not validate: %v", err)
		}
		for _, v := range m.Volumes {
			if int64(len(v.Chunks)) != chunkCount(v.SizeBytes, v.ChunkSize) {
				t.Fatalf("volume %q: %d chunks for %d bytes of %d", v.Name, len(v.Chunks), v.SizeBytes, v.ChunkSize)
			}
			for _, c := range v.Chunks {
				if c != "" {
					if _, ok := parseChunkKey(chunkKey(c)); !ok {
						t.Fatalf("chunk %q makes key %q", c, chunkKey(c))
					}
				}
			}
		}
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeManifest(again, testID); err != nil {
			t.Fatalf("an accepted manifest encodes to one refused: %v", err)
		}
	})
}
