package repo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// manifestDir holds the manifests: manifests/<id>.<sha256>.json, the
// sha256 being that of the object's bytes. The checksum is in the key
// rather than in a second object so that a manifest is one atomic Put:
// there is never a manifest without its checksum, or a checksum of
// another version of it.
const manifestDir = "manifests/"

// ErrExists is a manifest id that is already in the repository.
var ErrExists = errors.New("already exists")

func manifestKey(id, sum string) string { return manifestDir + id + "." + sum + ".json" }

// parseManifestKey is the id and checksum a manifest key names, if it
// is one.
func parseManifestKey(key string) (id, sum string, ok bool) {
	rest, ok := strings.CutPrefix(key, manifestDir)
	if !ok {
		return "", "", false
	}
	rest, ok = strings.CutSuffix(rest, ".json")
	if !ok {
		return "", "", false
	}
	id, sum, ok = strings.Cut(rest, ".")
	if !ok || validation.CheckUID(id) != nil || !isHash(sum) {
		return "", "", false
	}
	return id, sum, true
}

// PutManifest sets m.Format, validates m and stores it. A manifest is
// written once: an id already in the repository is ErrExists.
func (r *Repo) PutManifest(ctx context.Context, m *Manifest) error {
	m.Format = FormatVersion
	if err := ValidateManifest(m); err != nil {
		return err
	}
	keys, err := r.manifestKeys(ctx, m.ID)
	if err != nil {
		return err
	}
	if len(keys) > 0 {
		return fmt.Errorf("manifest %s: %w", m.ID, ErrExists)
	}
	data, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("manifest %s: %w", m.ID, err)
	}
	if len(data) > MaxManifestBytes {
		return fmt.Errorf("manifest %s: %d bytes, at most %d", m.ID, len(data), MaxManifestBytes)
	}
	sum := sha256.Sum256(data)
	key := manifestKey(m.ID, hex.EncodeToString(sum[:]))
	if err := r.store.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
		return fmt.Errorf("manifest %s: %w", m.ID, err)
	}
	return nil
}

// manifestKeys are the keys of manifest id: one, or none.
func (r *Repo) manifestKeys(ctx context.Context, id string) ([]string, error) {
	if err := validation.CheckUID(id); err != nil {
		return nil, fmt.Errorf("manifest id: %w", err)
	}
	var keys []string
	err := r.store.List(ctx, manifestDir+id+".", func(o ObjectInfo) error {
		if got, _, ok := parseManifestKey(o.Key); ok && got == id {
			keys = append(keys, o.Key)
		}
		return nil
	})
	return keys, err
}

// GetManifest reads backup id, verifies its checksum (a truncated or
// altered manifest is ErrCorrupt) and validates it; a missing one is
// ErrNotFound.
func (r *Repo) GetManifest(ctx context.Context, id string) (*Manifest, error) {
	keys, err := r.manifestKeys(ctx, id)
	if err != nil {
		return nil, err
	}
	switch len(keys) {
	case 0:
		return nil, fmt.Errorf("backup %s: %w", id, ErrNotFound)
	case 1:
		return r.readManifest(ctx, keys[0])
	default:
		slices.Sort(keys)
		return nil, &CorruptError{Key: keys[0], Reason: fmt.Sprintf("backup %s has %d manifests (%s)", id, len(keys), strings.Join(keys, ", "))}
	}
}

// readManifest reads, checks and decodes the manifest at key.
func (r *Repo) readManifest(ctx context.Context, key string) (*Manifest, error) {
	id, sum, ok := parseManifestKey(key)
	if !ok {
		return nil, fmt.Errorf("%q is not a manifest key", clip(key))
	}
	rc, err := r.store.Get(ctx, key)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("backup %s: %w", id, ErrNotFound)
		}
		return nil, err
	}
	defer rc.Close()
	h := sha256.New()
	data, err := io.ReadAll(io.TeeReader(io.LimitReader(rc, MaxManifestBytes+1), h))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	if len(data) > MaxManifestBytes {
		return nil, &CorruptError{Key: key, Reason: fmt.Sprintf("larger than %d bytes", MaxManifestBytes)}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return nil, &CorruptError{Key: key, Reason: fmt.Sprintf("its %d bytes have sha256 %s, not the %s its name says: truncated or altered", len(data), got, sum)}
	}
	m, err := decodeManifest(data, id)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", key, err)
	}
	return m, nil
}

// decodeManifest decodes the manifest of backup id from its bytes. The
// bytes are those that were written (the checksum said so); what they
// say is still checked, since whoever wrote the target may not be
// virtplane: strict JSON (no unknown fields, nothing after the object),
// the id the key names, every field (ValidateManifest).
func decodeManifest(data []byte, id string) (*Manifest, error) {
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the JSON object")
	}
	if m.ID != id {
		return nil, fmt.Errorf("holds id %q", clip(m.ID))
	}
	if err := ValidateManifest(&m); err != nil {
		return nil, err
	}
	return &m, nil
}

// Info is what a listing says of m, stored at key.
func (m *Manifest) Info(key string) ManifestInfo {
	info := ManifestInfo{
		ID: m.ID, Cluster: m.Cluster, VMNamespace: m.VMNamespace, VMName: m.VMName, VMUID: m.VMUID,
		Created: m.Created, Labels: m.Labels, Volumes: len(m.Volumes), Key: key,
	}
	for i := range m.Volumes {
		v := &m.Volumes[i]
		info.SizeBytes += v.SizeBytes
		for j, c := range v.Chunks {
			if c != "" {
				info.DataBytes += chunkLen(v.SizeBytes, v.ChunkSize, j)
			}
		}
	}
	return info
}

// ListManifests is every backup in the repository, newest first. A
// manifest that cannot be read or is corrupt is an error: a listing that
// left it out would let retention and GC act on a wrong picture.
func (r *Repo) ListManifests(ctx context.Context) ([]ManifestInfo, error) {
	var infos []ManifestInfo
	err := r.eachManifest(ctx, func(m *Manifest, key string) error {
		infos = append(infos, m.Info(key))
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(infos, func(a, b ManifestInfo) int {
		if c := b.Created.Compare(a.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return infos, nil
}

// eachManifest reads every manifest (Concurrency at a time) and calls fn
// with each, one call at a time.
func (r *Repo) eachManifest(ctx context.Context, fn func(m *Manifest, key string) error) error {
	var keys []string
	ids := map[string]string{}
	err := r.store.List(ctx, manifestDir, func(o ObjectInfo) error {
		id, _, ok := parseManifestKey(o.Key)
		if !ok {
			r.log.Warn("backup repository: ignoring an object that is not a manifest", "key", clip(o.Key))
			return nil
		}
		if other, dup := ids[id]; dup {
			return &CorruptError{Key: o.Key, Reason: "backup " + id + " has a second manifest, " + other}
		}
		ids[id] = o.Key
		keys = append(keys, o.Key)
		return nil
	})
	if err != nil {
		return err
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.opts.Concurrency)
	for _, key := range keys {
		g.Go(func() error {
			m, err := r.readManifest(gctx, key)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			return fn(m, key)
		})
	}
	return g.Wait()
}

// DeleteManifest deletes backup id (its chunks stay until GC); a missing
// one is not an error.
func (r *Repo) DeleteManifest(ctx context.Context, id string) error {
	keys, err := r.manifestKeys(ctx, id)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := r.store.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}
