package provider

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// casStore stands in for the agent's compare-and-swap: an update carrying
// another resource version than the stored one is refused with Aborted,
// and conflicts more writes by "another writer" land between our read and
// our write.
type casStore struct {
	obj       *apiv1.Image
	conflicts int // writes by another writer still to come
	gets      int
	updates   []*apiv1.Image
}

func newCASStore(uid string) *casStore {
	return &casStore{obj: &apiv1.Image{
		Metadata: &apiv1.ObjectMeta{Name: "debian", Uid: uid, ResourceVersion: 7, Labels: map[string]string{"tier": "old"}},
		Spec:     &apiv1.ImageSpec{Url: "https://images.example/debian.qcow2"},
	}}
}

func (s *casStore) get(context.Context) (*apiv1.Image, error) {
	s.gets++
	return proto.Clone(s.obj).(*apiv1.Image), nil
}

func (s *casStore) update(_ context.Context, next *apiv1.Image) (*apiv1.Image, error) {
	s.updates = append(s.updates, proto.Clone(next).(*apiv1.Image))
	if s.conflicts > 0 {
		s.conflicts--
		s.obj.Metadata.ResourceVersion++ // the other writer's write
	}
	if next.GetMetadata().GetResourceVersion() != s.obj.GetMetadata().GetResourceVersion() {
		return nil, status.Error(codes.Aborted, "resource version changed")
	}
	s.obj = proto.Clone(next).(*apiv1.Image)
	s.obj.Metadata.ResourceVersion++
	return proto.Clone(s.obj).(*apiv1.Image), nil
}

// setLabel is the plan: one label, merged onto whatever is stored.
func setLabel(v string) func(*apiv1.Image) *apiv1.Image {
	return func(cur *apiv1.Image) *apiv1.Image {
		next := proto.Clone(cur).(*apiv1.Image)
		next.Metadata.Labels = map[string]string{"tier": v}
		return next
	}
}

func TestUpdateCASRetriesConflictsThenWrites(t *testing.T) {
	s := newCASStore("u1")
	s.conflicts = 2
	got, written, err := updateCAS(t.Context(), "image debian", "u1", s.get, setLabel("new"), s.update)
	if err != nil {
		t.Fatalf("updateCAS: %v", err)
	}
	if !written || len(s.updates) != 3 || s.gets != 3 {
		t.Fatalf("written=%v after %d gets, %d updates; want written after 3 of each", written, s.gets, len(s.updates))
	}
	// Each attempt re-read: the last write carried the version the other
	// writer left, not the first one read.
	if rv := s.updates[2].GetMetadata().GetResourceVersion(); rv != 9 {
		t.Errorf("last attempt wrote on resource version %d, want 9", rv)
	}
	if !proto.Equal(got, s.obj) || got.GetMetadata().GetLabels()["tier"] != "new" {
		t.Errorf("returned %v, want the stored %v with tier=new", got, s.obj)
	}
}

func TestUpdateCASGivesUpAfterMaxConflictRetries(t *testing.T) {
	s := newCASStore("u1")
	s.conflicts = maxConflictRetries + 5
	got, written, err := updateCAS(t.Context(), "image debian", "u1", s.get, setLabel("new"), s.update)
	if len(s.updates) != maxConflictRetries {
		t.Errorf("%d updates, want %d", len(s.updates), maxConflictRetries)
	}
	var failed *casCallError
	if !errors.As(err, &failed) || failed.call != "update image debian" || status.Code(failed.err) != codes.Aborted {
		t.Fatalf("err = %#v, want a casCallError for \"update image debian\" wrapping Aborted", err)
	}
	if got != nil || written {
		t.Errorf("returned %v, written=%v; want nothing", got, written)
	}
	if s.obj.GetMetadata().GetLabels()["tier"] != "old" {
		t.Errorf("stored labels %v changed", s.obj.GetMetadata().GetLabels())
	}
}

func TestUpdateCASRefusesAnotherUID(t *testing.T) {
	s := newCASStore("u2")
	_, written, err := updateCAS(t.Context(), "image debian", "u1", s.get, setLabel("new"), s.update)
	var replaced *replacedError
	if !errors.As(err, &replaced) {
		t.Fatalf("err = %v, want a replacedError", err)
	}
	if *replaced != (replacedError{what: "image debian", stateUID: "u1", gotUID: "u2"}) {
		t.Errorf("replacedError = %+v", *replaced)
	}
	if written || len(s.updates) != 0 {
		t.Errorf("written=%v with %d updates; want no write", written, len(s.updates))
	}

	// An empty state uid (not read yet) skips the check.
	if _, written, err := updateCAS(t.Context(), "image debian", "", s.get, setLabel("new"), s.update); err != nil || !written {
		t.Errorf("empty state uid: written=%v, err=%v; want a write", written, err)
	}
}

func TestUpdateCASWritesNothingUnchanged(t *testing.T) {
	s := newCASStore("u1")
	got, written, err := updateCAS(t.Context(), "image debian", "u1", s.get, setLabel("old"), s.update)
	if err != nil || written || len(s.updates) != 0 {
		t.Fatalf("written=%v, err=%v, %d updates; want no write and no error", written, err, len(s.updates))
	}
	if !proto.Equal(got, s.obj) {
		t.Errorf("returned %v, want the stored %v", got, s.obj)
	}
}

func TestUpdateCASReadFailure(t *testing.T) {
	s := newCASStore("u1")
	get := func(context.Context) (*apiv1.Image, error) {
		return nil, status.Error(codes.NotFound, "no image debian")
	}
	_, _, err := updateCAS(t.Context(), "image debian", "u1", get, setLabel("new"), s.update)
	var failed *casCallError
	if !errors.As(err, &failed) || failed.call != "read image debian before updating it" || status.Code(failed.err) != codes.NotFound {
		t.Fatalf("err = %#v, want a casCallError for the read wrapping NotFound", err)
	}
	if len(s.updates) != 0 {
		t.Errorf("%d updates after a failed read", len(s.updates))
	}
}

func TestAddCASError(t *testing.T) {
	var calls []string
	addError := func(diags *diag.Diagnostics, err error, call string) {
		calls = append(calls, call+": "+status.Code(err).String())
		diags.AddError("call failed", call)
	}

	var diags diag.Diagnostics
	if addCASError(&diags, nil, imageKind, "debian", addError) || diags.HasError() {
		t.Fatalf("nil error reported: %v", diags)
	}
	if !addCASError(&diags, &replacedError{what: "image debian", stateUID: "u1", gotUID: "u2"}, imageKind, "debian", addError) {
		t.Fatal("replacedError not reported")
	}
	want := "The image Terraform manages (uid u1) was deleted and another image of the same name (uid u2) exists; " +
		"Terraform does not update an image it did not create. Refresh to drop the old one from the state."
	if d := diags.Errors()[0]; d.Summary() != "Image debian was replaced outside Terraform" || d.Detail() != want || len(calls) != 0 {
		t.Errorf("replaced diagnostic %q / %q, calls %v", d.Summary(), d.Detail(), calls)
	}
	wrapped := &casCallError{call: "update image debian", err: status.Error(codes.PermissionDenied, "no")}
	if !addCASError(&diags, wrapped, imageKind, "debian", addError) || strings.Join(calls, ",") != "update image debian: PermissionDenied" {
		t.Errorf("call failure reported as %v", calls)
	}
}
