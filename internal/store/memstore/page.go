package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// ListPage is store.Store's, with one difference: memstore keeps no
// history, so every page reads the current objects (in key order from the
// token's start) rather than the first page's revision, and a token never
// expires. The tokens are the etcd store's, so the checks are the same.
func (s *Store[T]) ListPage(_ context.Context, opts store.ListOptions, limit int64, cont string) (store.Page[T], error) {
	f, err := s.res.Select(opts.Namespace, "", opts.LabelSelector)
	if err != nil {
		return store.Page[T]{}, err
	}
	rev, start, err := store.PageStart(cont, opts.Namespace, limit)
	if err != nil {
		return store.Page[T]{}, fmt.Errorf("%s: %w", s.res.Plural, err)
	}
	s.db.mu.Lock()
	defer s.db.mu.Unlock()
	if limit == 0 && cont == "" {
		return store.Page[T]{Items: s.listLocked(f), Revision: s.db.rev}, nil
	}
	if rev == 0 {
		rev = s.db.rev
	}
	var keys []string
	for k := range s.items {
		if k >= start && (opts.Namespace == "" || strings.HasPrefix(k, opts.Namespace+"/")) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	p := store.Page[T]{Items: []T{}, Revision: rev}
	if limit > 0 && int64(len(keys)) > limit {
		keys = keys[:limit]
		p.Continue = store.EncodeContinue(rev, keys[len(keys)-1]+"\x00")
	}
	for _, k := range keys {
		if o := s.items[k]; f.Matches(o) {
			p.Items = append(p.Items, clone(o))
		}
	}
	return p, nil
}
