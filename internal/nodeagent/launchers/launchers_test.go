package launchers

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A launcher that cannot be reached is told from one that answered with
// an error; a call the agent canceled (it is stopping) is neither.
func TestUnavailable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{fmt.Errorf("launching for default/a: %w", ErrUnavailable), true},
		{context.DeadlineExceeded, true},
		{status.Error(codes.Unavailable, "connection refused"), true},
		{fmt.Errorf("getting domain: %w", status.Error(codes.DeadlineExceeded, "slow")), true},
		{context.Canceled, false},
		{status.Error(codes.Canceled, "agent stopping"), false},
		{fmt.Errorf("%w: %w", ErrUnavailable, context.Canceled), false},
		{status.Error(codes.Internal, "libvirt: no such file"), false},
		{errors.New("other"), false},
	} {
		if got := Unavailable(tc.err); got != tc.want {
			t.Errorf("Unavailable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// The message of a launcher's answer is libvirt's own text, without the
// gRPC decoration or the agent's wrapping.
func TestErrorMessage(t *testing.T) {
	err := fmt.Errorf("syncing default/a: %w", status.Error(codes.Internal, "Cannot access storage file '/x/vmlinux'"))
	if got := ErrorMessage(err); got != "Cannot access storage file '/x/vmlinux'" {
		t.Errorf("ErrorMessage = %q", got)
	}
	if got := ErrorMessage(errors.New("plain")); got != "plain" {
		t.Errorf("ErrorMessage of a plain error = %q", got)
	}
}
