package store

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"
)

// UpdateLoop is GuaranteedUpdate's loop, the same in every backend. cur is
// the stored object namespace/name; fn changes a copy of it, and write
// stores fn's result unless it equals cur: a compare-and-swap against
// cur's resource version that reports ErrConflict with the object now
// stored, on which fn runs again, at most MaxConflictRetries times.
// describe adds the backend's kind and the object's name to an error of
// its own.
func UpdateLoop[T Object](ctx context.Context, cur T, namespace, name string, fn func(T) (T, error),
	write func(T) (out, latest T, err error), describe func(error) error) (T, error) {
	var zero T
	for attempt := 1; ; attempt++ {
		out, err := fn(proto.Clone(cur).(T))
		if err != nil {
			return zero, err
		}
		md := out.GetMetadata()
		if md == nil || md.Namespace != namespace || md.Name != name {
			return zero, describe(fmt.Errorf("%w: update function changed the object's name", ErrInvalid))
		}
		if proto.Equal(cur, out) {
			return cur, nil
		}
		// The compare-and-swap is against what fn saw, whatever fn did.
		md.ResourceVersion = cur.GetMetadata().ResourceVersion
		res, latest, err := write(out)
		if !errors.Is(err, ErrConflict) {
			return res, err
		}
		if attempt >= MaxConflictRetries {
			return zero, fmt.Errorf("giving up after %d attempts: %w", attempt, err)
		}
		if ctx.Err() != nil {
			return zero, fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		if latest.GetMetadata() == nil { // a conflict with no object: it was deleted
			return zero, err
		}
		cur = latest
	}
}
