package repo

import (
	"math/rand/v2"
	"testing"
)

// The codec's cost per chunk, apart from any store.
func BenchmarkChunkCodec(b *testing.B) {
	data := make([]byte, DefaultChunkSize)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range data {
		if i%4096 < 2048 {
			data[i] = byte(rng.Uint32())
		}
	}
	z := encoder().EncodeAll(data, nil)
	b.Run("hash", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for range b.N {
			hashChunk(data)
		}
	})
	b.Run("compress", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		for range b.N {
			encoder().EncodeAll(data, make([]byte, 0, len(data)/2))
		}
	})
	b.Run("decompress", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		buf := make([]byte, 0, len(data))
		for range b.N {
			if _, err := decoder().DecodeAll(z, buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("zero-check", func(b *testing.B) {
		zero := make([]byte, DefaultChunkSize)
		b.SetBytes(int64(len(zero)))
		for range b.N {
			isZero(zero)
		}
	})
}
