package provider

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestAPIError(t *testing.T) {
	const ep = "unix:///run/virtplane/agent.sock"
	tests := []struct {
		err  error
		want []string
	}{
		{status.Error(codes.Unavailable, "connection refused"),
			[]string{"unreachable at " + ep, "connection refused", "virtplane-agent is running"}},
		{status.Error(codes.Unavailable, "tls: failed to verify certificate: x509: certificate signed by unknown authority"),
			[]string{"unreachable at " + ep, "ca_file"}},
		{status.Error(codes.Unauthenticated, "missing bearer token"),
			[]string{"rejected", "missing bearer token", "token_file"}},
		{status.Error(codes.Internal, "boom"), []string{"Internal", "boom", ep}},
		// Refusals of issue 36 keep the agent's words: the role that
		// would allow the call, the quota that would be exceeded.
		{status.Error(codes.PermissionDenied, "serviceaccount team-a/ci (edit in team-a) may not call StorageClasses.Create: needs cluster-admin"),
			[]string{"denied", "may not call StorageClasses.Create: needs cluster-admin"}},
		{status.Error(codes.ResourceExhausted, "namespace team-a: exceeded quota: vcpus: requested 4, used 14, limited 16"),
			[]string{"quota exceeded", "namespace team-a: exceeded quota: vcpus: requested 4, used 14, limited 16", "set-quota"}},
		{errors.New("not a status"), []string{"not a status"}},
	}
	for _, tt := range tests {
		summary, detail := apiError(tt.err, ep, "list nodes")
		text := summary + "\n" + detail
		if !strings.HasPrefix(detail, "Cannot list nodes") {
			t.Errorf("%v: detail does not say what failed: %s", tt.err, detail)
		}
		for _, w := range tt.want {
			if !strings.Contains(text, w) {
				t.Errorf("%v: message lacks %q:\n%s", tt.err, w, text)
			}
		}
	}
}
