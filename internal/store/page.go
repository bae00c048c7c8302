package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ErrExpired: a continue token's revision has been compacted, so the rest
// of that list can no longer be read consistently (Kubernetes' 410 Gone).
// The caller lists again from the start.
var ErrExpired = errors.New("expired")

// Page is one page of a paged list (ListPage).
type Page[T Object] struct {
	Items []T
	// Revision every page of the list is read at: the first page's.
	Revision int64
	// Continue reads the next page; empty on the last page.
	Continue string
}

// continueVersion tells this token format from any later one.
const continueVersion = "virtplane.io/v1"

// continueToken is what a continue string encodes, as Kubernetes does:
// base64 of JSON with the revision of the first page and the key to start
// from. Start is relative to the resource's key root, so that the store's
// prefix does not leak to clients and a token of one resource kind fails
// the namespace check of another rather than reading its keys.
type continueToken struct {
	V     string `json:"v"`
	Rev   int64  `json:"rv"`
	Start string `json:"start"`
}

// EncodeContinue is the token for the page starting at start (a key
// relative to the resource root, "<namespace>/<name>" or "<name>") read at
// revision rev.
func EncodeContinue(rev int64, start string) string {
	b, _ := json.Marshal(continueToken{V: continueVersion, Rev: rev, Start: start})
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeContinue checks a token and returns its revision and start key
// (relative to the resource root); a malformed one is ErrInvalid naming
// continue.
func DecodeContinue(tok string) (rev int64, start string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, "", fmt.Errorf("%w: continue: not a token this server issued: %w", ErrInvalid, err)
	}
	var t continueToken
	if err := json.Unmarshal(b, &t); err != nil {
		return 0, "", fmt.Errorf("%w: continue: not a token this server issued: %w", ErrInvalid, err)
	}
	switch {
	case t.V != continueVersion:
		return 0, "", fmt.Errorf("%w: continue: token version %q, want %q", ErrInvalid, t.V, continueVersion)
	case t.Rev <= 0:
		return 0, "", fmt.Errorf("%w: continue: token has no revision", ErrInvalid)
	case t.Start == "" || strings.HasPrefix(t.Start, "/") || strings.Contains(t.Start, ".."):
		return 0, "", fmt.Errorf("%w: continue: token has no valid start key", ErrInvalid)
	}
	return t.Rev, t.Start, nil
}

// PageStart checks a continue token against the selection's namespace
// (the token must continue a list of the same namespace, or of all) and
// returns its revision and start key relative to the resource root; an
// empty token starts at the namespace's first key at revision 0 (now).
func PageStart(cont, namespace string, limit int64) (rev int64, start string, err error) {
	if limit < 0 {
		return 0, "", fmt.Errorf("%w: limit: must not be negative, got %d", ErrInvalid, limit)
	}
	if cont == "" {
		return 0, "", nil
	}
	rev, start, err = DecodeContinue(cont)
	if err != nil {
		return 0, "", err
	}
	if namespace != "" && !strings.HasPrefix(start, namespace+"/") {
		return 0, "", fmt.Errorf("%w: continue: the token continues a list of another namespace than %q", ErrInvalid, namespace)
	}
	return rev, start, nil
}

// expired tells the caller that rev was compacted, without wrapping etcd's
// error: that is a gRPC status the API server would pass on as is.
func expired(kind string, rev int64) error {
	return fmt.Errorf("%ss: %w: the continue token's revision %d has been compacted; list again without continue", kind, ErrExpired, rev)
}

// ListPage reads one page: at most limit keys (0: all that are left) from
// the token's start, at its revision, filtered by the selector. Without a
// limit and a token it is List.
func (s *etcdStore[T]) ListPage(ctx context.Context, opts ListOptions, limit int64, cont string) (Page[T], error) {
	defer s.metrics.observe(opList, time.Now())
	f, err := s.newFilter(opts.Namespace, "", opts.LabelSelector)
	if err != nil {
		return Page[T]{}, err
	}
	rev, start, err := PageStart(cont, opts.Namespace, limit)
	if err != nil {
		return Page[T]{}, fmt.Errorf("%ss: %w", s.keys.kind, err)
	}
	if limit == 0 && cont == "" {
		items, rev, err := s.list(ctx, f)
		return Page[T]{Items: items, Revision: rev}, err
	}
	from := f.key
	if start != "" {
		from = s.keys.root + start
	}
	ops := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(f.key))}
	if limit > 0 {
		ops = append(ops, clientv3.WithLimit(limit))
	}
	if rev > 0 {
		ops = append(ops, clientv3.WithRev(rev))
	}
	resp, err := s.client.Get(ctx, from, ops...)
	switch {
	case errors.Is(err, rpctypes.ErrCompacted):
		return Page[T]{}, expired(s.keys.kind, rev)
	case errors.Is(err, rpctypes.ErrFutureRev):
		return Page[T]{}, fmt.Errorf("%ss: %w: continue: the token's revision %d is in the future", s.keys.kind, ErrInvalid, rev)
	case err != nil:
		return Page[T]{}, fmt.Errorf("%ss: list page: %w", s.keys.kind, err)
	}
	if rev == 0 {
		rev = resp.Header.Revision
	}
	p := Page[T]{Items: make([]T, 0, len(resp.Kvs)), Revision: rev}
	for _, kv := range resp.Kvs {
		obj, err := s.decode(kv.Value, kv.ModRevision)
		if err != nil {
			return Page[T]{}, err
		}
		if f.Matches(obj) {
			p.Items = append(p.Items, obj)
		}
	}
	if resp.More && len(resp.Kvs) > 0 {
		// The smallest key after the last one read.
		last := strings.TrimPrefix(string(resp.Kvs[len(resp.Kvs)-1].Key), s.keys.root)
		p.Continue = EncodeContinue(rev, last+"\x00")
	}
	return p, nil
}
