package provider

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/resource"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Read keeps an object in the state only while the agent has the very
// object the state records; it drops one that is gone or was replaced, and
// an agent that cannot answer is an error, never a deletion.
func TestStillManaged(t *testing.T) {
	ctx := context.Background()
	r := &configuredResource{kind: imageKind, data: &providerData{endpoint: "unix:///x"}}
	for _, c := range []struct {
		name             string
		stateUID, gotUID string
		err              error
		keep, dropped    bool
		errorSays        string
		warningSays      string
	}{
		{name: "same object", stateUID: "u1", gotUID: "u1", keep: true},
		{name: "imported, uid not yet read", stateUID: "", gotUID: "u1", keep: true},
		{name: "deleted", stateUID: "u1", err: status.Error(codes.NotFound, "no image debian"), dropped: true},
		{name: "replaced", stateUID: "u1", gotUID: "u2", dropped: true,
			warningSays: "The image Terraform created (uid u1) is gone and another image of the same name (uid u2) exists."},
		{name: "unreachable", stateUID: "u1", err: status.Error(codes.Unavailable, "connection refused"),
			errorSays: "Cannot read image debian: the virtplane agent is unreachable at unix:///x"},
		{name: "not a status", stateUID: "u1", err: errors.New("boom"), errorSays: "Cannot read image debian"},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := &resource.ReadResponse{State: nonNullState(t)}
			got := r.stillManaged(ctx, resp, "debian", c.stateUID, c.gotUID, c.err)
			if got != c.keep {
				t.Errorf("stillManaged = %v, want %v", got, c.keep)
			}
			if dropped := resp.State.Raw.IsNull(); dropped != c.dropped {
				t.Errorf("state removed = %v, want %v", dropped, c.dropped)
			}
			errs, warns := resp.Diagnostics.Errors(), resp.Diagnostics.Warnings()
			if (c.errorSays != "") != (len(errs) == 1) || (len(errs) == 1 && !strings.Contains(errs[0].Detail(), c.errorSays)) {
				t.Errorf("errors %v, want one saying %q", errs, c.errorSays)
			}
			if (c.warningSays != "") != (len(warns) == 1) || (len(warns) == 1 && !strings.Contains(warns[0].Detail(), c.warningSays)) {
				t.Errorf("warnings %v, want one saying %q", warns, c.warningSays)
			}
		})
	}
}
