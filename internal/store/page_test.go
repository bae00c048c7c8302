package store_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/storetest"
)

// pageAll reads every page of a list with limit, and the revisions and
// sizes of the pages.
func pageAll(t *testing.T, s store.Store[*apiv1.VirtualMachine], opts store.ListOptions, limit int64) (refs []string, revs []int64) {
	t.Helper()
	cont := ""
	for {
		p, err := s.ListPage(t.Context(), opts, limit, cont)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(p.Items)) > limit {
			t.Fatalf("page of %d items, limit %d", len(p.Items), limit)
		}
		for _, vm := range p.Items {
			refs = append(refs, apiv1.Ref(vm.Metadata.Namespace, vm.Metadata.Name))
		}
		revs = append(revs, p.Revision)
		if p.Continue == "" {
			return refs, revs
		}
		cont = p.Continue
	}
}

// Pages of every size hold every object exactly once, within a namespace
// ("a" and "a-b" share a key prefix but not a namespace) or all of them,
// and a selector filters within pages.
func TestListPageCoversEverythingOnce(t *testing.T) {
	t.Parallel()
	s := vmStoreWith(t, storetest.Client(t))
	for _, ns := range []string{"a", "a-b", "b"} {
		for i := range 7 {
			storetest.MustCreate(t, s, storetest.NewVM(ns, fmt.Sprintf("vm-%02d", i), map[string]string{"odd": fmt.Sprint(i%2 == 1)}))
		}
	}
	for _, tc := range []struct {
		opts store.ListOptions
		want int
	}{
		{store.ListOptions{}, 21},
		{store.ListOptions{Namespace: "a"}, 7},
		{store.ListOptions{Namespace: "a-b"}, 7},
		{store.ListOptions{LabelSelector: "odd=true"}, 9},
	} {
		all, _, err := s.List(t.Context(), tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, vm := range all {
			want = append(want, apiv1.Ref(vm.Metadata.Namespace, vm.Metadata.Name))
		}
		slices.Sort(want) // pages are in key order, List by namespace/name
		for _, limit := range []int64{1, 2, 5, 7, 20, 21, 100} {
			got, revs := pageAll(t, s, tc.opts, limit)
			slices.Sort(got)
			if len(got) != tc.want || !slices.Equal(got, want) {
				t.Errorf("%+v limit %d: got %v, want %v", tc.opts, limit, got, want)
			}
			if len(slices.Compact(revs)) != 1 {
				t.Errorf("%+v limit %d: pages at revisions %v, want one", tc.opts, limit, revs)
			}
		}
	}
}

// Every page is read at the first page's revision: objects created,
// updated or deleted after it are seen as they were then.
func TestListPageConsistentWhileWriting(t *testing.T) {
	t.Parallel()
	s := vmStoreWith(t, storetest.Client(t))
	for i := range 10 {
		storetest.MustCreate(t, s, storetest.NewVM("ns", fmt.Sprintf("vm-%02d", i), nil))
	}
	first, err := s.ListPage(t.Context(), store.ListOptions{Namespace: "ns"}, 3, "")
	if err != nil {
		t.Fatal(err)
	}
	// Writes between the pages: a new object after the cursor, a deleted
	// and an updated one not yet read.
	storetest.MustCreate(t, s, storetest.NewVM("ns", "vm-05a", nil))
	if _, _, err := s.Delete(t.Context(), "ns", "vm-06", store.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	old, err := s.Get(t.Context(), "ns", "vm-07")
	if err != nil {
		t.Fatal(err)
	}
	upd := proto.Clone(old).(*apiv1.VirtualMachine)
	upd.Metadata.Labels = map[string]string{"changed": "yes"}
	if _, err := s.Update(t.Context(), upd); err != nil {
		t.Fatal(err)
	}

	got := map[string]*apiv1.VirtualMachine{}
	for _, vm := range first.Items {
		got[vm.Metadata.Name] = vm
	}
	cont := first.Continue
	for cont != "" {
		p, err := s.ListPage(t.Context(), store.ListOptions{Namespace: "ns"}, 3, cont)
		if err != nil {
			t.Fatal(err)
		}
		if p.Revision != first.Revision {
			t.Fatalf("page at revision %d, first at %d", p.Revision, first.Revision)
		}
		for _, vm := range p.Items {
			got[vm.Metadata.Name] = vm
		}
		cont = p.Continue
	}
	if len(got) != 10 || got["vm-05a"] != nil || got["vm-06"] == nil {
		t.Errorf("pages hold %d objects (vm-05a %v, vm-06 %v), want the 10 of the first revision", len(got), got["vm-05a"] != nil, got["vm-06"] != nil)
	}
	if vm := got["vm-07"]; vm == nil || vm.Metadata.ResourceVersion != old.Metadata.ResourceVersion || vm.Metadata.Labels["changed"] != "" {
		t.Errorf("vm-07 read as %v, want it as of the first page (resource version %d)", vm.GetMetadata(), old.Metadata.ResourceVersion)
	}
}

// Bad tokens and limits are ErrInvalid naming what is wrong.
func TestListPageTokenErrors(t *testing.T) {
	t.Parallel()
	s := vmStoreWith(t, storetest.Client(t))
	for i := range 3 {
		storetest.MustCreate(t, s, storetest.NewVM("b", fmt.Sprintf("vm-%d", i), nil))
	}
	p, err := s.ListPage(t.Context(), store.ListOptions{Namespace: "b"}, 1, "")
	if err != nil || p.Continue == "" {
		t.Fatalf("first page: continue %q, %v", p.Continue, err)
	}
	for _, tc := range []struct {
		name, ns, cont, want string
		limit                int64
	}{
		{"garbage", "b", "not-a-token!", "continue", 1},
		{"not json", "b", "bm90IGpzb24", "continue", 1},
		{"other version", "b", tokenJSON(`{"v":"x/v9","rv":5,"start":"b/x"}`), "continue", 1},
		{"no revision", "b", tokenJSON(`{"v":"virtplane.io/v1","start":"b/x"}`), "continue", 1},
		{"escapes the root", "b", tokenJSON(`{"v":"virtplane.io/v1","rv":5,"start":"../nodes/x"}`), "continue", 1},
		{"other namespace", "a", p.Continue, "another namespace", 1},
		{"future revision", "b", store.EncodeContinue(p.Revision+1000000, "b/vm-1"), "future", 1},
		{"negative limit", "b", "", "limit", -1},
	} {
		_, err := s.ListPage(t.Context(), store.ListOptions{Namespace: tc.ns}, tc.limit, tc.cont)
		if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalid mentioning %q", tc.name, err, tc.want)
		}
	}
}

// tokenJSON is a token as the store encodes one, of any content.
func tokenJSON(j string) string { return base64.RawURLEncoding.EncodeToString([]byte(j)) }

// A token whose revision was compacted has expired (Kubernetes' 410).
// A server of its own: compaction would disturb the shared one's tests.
func TestListPageExpiredToken(t *testing.T) {
	t.Parallel()
	c := storetest.NewServer(t).Client()
	s := vmStoreWith(t, c)
	for i := range 3 {
		storetest.MustCreate(t, s, storetest.NewVM("ns", fmt.Sprintf("vm-%d", i), nil))
	}
	p, err := s.ListPage(t.Context(), store.ListOptions{}, 1, "")
	if err != nil {
		t.Fatal(err)
	}
	last := storetest.MustCreate(t, s, storetest.NewVM("ns", "later", nil))
	if _, err := c.Compact(t.Context(), last.Metadata.ResourceVersion); err != nil {
		t.Fatal(err)
	}
	_, err = s.ListPage(t.Context(), store.ListOptions{}, 1, p.Continue)
	if !errors.Is(err, store.ErrExpired) || !strings.Contains(err.Error(), "compacted") {
		t.Errorf("after compaction: %v, want ErrExpired", err)
	}
}
