package repo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// chunkDir holds the chunks: chunks/<hh>/<sha256>, hh being the hash's
// first two hex digits, so that no directory of a directory store holds
// more than 1/256 of them.
const chunkDir = "chunks/"

func chunkKey(hash string) string { return chunkDir + hash[:2] + "/" + hash }

// parseChunkKey is the hash a chunk key names, if it is one.
func parseChunkKey(key string) (string, bool) {
	rest, ok := strings.CutPrefix(key, chunkDir)
	if !ok || len(rest) != 2+1+64 || rest[2] != '/' {
		return "", false
	}
	h := rest[3:]
	if !isHash(h) || h[:2] != rest[:2] {
		return "", false
	}
	return h, true
}

// The codec is shared: EncodeAll and DecodeAll may be called
// concurrently, and neither starts goroutines that would need a Close.
var (
	encoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
		if err != nil {
			panic(err) // only for invalid options
		}
		return e
	})
	// The decoder never makes more than a chunk of the largest size:
	// a hostile object that claims more fails before it is allocated.
	decoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(MaxChunkSize), zstd.WithDecoderConcurrency(0))
		if err != nil {
			panic(err)
		}
		return d
	})
)

// maxStored bounds the stored size of a chunk of n bytes: zstd's
// worst case (incompressible data) is a little over n.
func maxStored(n int64) int64 { return n + n>>7 + 1024 }

// hashChunk is the hex sha256 of data.
func hashChunk(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

var zeros = make([]byte, 64<<10)

// isZero says whether data is all zeros.
func isZero(data []byte) bool {
	for len(data) > 0 {
		n := min(len(data), len(zeros))
		if !bytes.Equal(data[:n], zeros[:n]) {
			return false
		}
		data = data[n:]
	}
	return true
}

// putChunk compresses data and stores it under its hash; it returns the
// stored size.
func (r *Repo) putChunk(ctx context.Context, hash string, data []byte) (int64, error) {
	z := encoder().EncodeAll(data, make([]byte, 0, len(data)/2))
	if err := r.store.Put(ctx, chunkKey(hash), bytes.NewReader(z), int64(len(z))); err != nil {
		return 0, err
	}
	return int64(len(z)), nil
}

// getChunk fetches chunk hash, which must be n bytes, into buf (reused
// when large enough) and verifies it: its stored size within bounds, its
// decompressed size n and its sha256 hash. Anything else is a
// *CorruptError naming the key and volume; nothing unverified is
// returned.
func (r *Repo) getChunk(ctx context.Context, hash string, n int64, volume string, buf []byte) ([]byte, error) {
	key := chunkKey(hash)
	rc, err := r.store.Get(ctx, key)
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, &CorruptError{Key: key, Volume: volume, Reason: "missing", Err: ErrNotFound}
		}
		return nil, err
	}
	defer rc.Close()
	limit := maxStored(n)
	z, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	if int64(len(z)) > limit {
		return nil, &CorruptError{Key: key, Volume: volume, Reason: fmt.Sprintf("stored size above %d bytes, the bound of a %d-byte chunk", limit, n)}
	}
	if int64(cap(buf)) < n {
		buf = make([]byte, 0, n)
	}
	data, err := decoder().DecodeAll(z, buf[:0])
	if err != nil {
		return nil, &CorruptError{Key: key, Volume: volume, Reason: "does not decompress (truncated or altered)", Err: err}
	}
	if int64(len(data)) != n {
		return nil, &CorruptError{Key: key, Volume: volume, Reason: fmt.Sprintf("decompresses to %d bytes, not %d", len(data), n)}
	}
	if got := hashChunk(data); got != hash {
		return nil, &CorruptError{Key: key, Volume: volume, Reason: "its bytes have sha256 " + got + " (altered)"}
	}
	return data, nil
}
