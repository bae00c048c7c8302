package ceph_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/ceph"
)

// recorder is a TB that records how Require ended the test.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()               {}
func (r *recorder) Logf(string, ...any)   {}
func (r *recorder) Cleanup(func())        {}
func (r *recorder) Skip(args ...any)      { r.skipped = fmt.Sprint(args...) }
func (r *recorder) Fatal(args ...any)     { r.failed = fmt.Sprint(args...) }
func (r *recorder) Error(args ...any)     { r.failed = fmt.Sprint(args...) }
func (r *recorder) Skipf(string, ...any)  { panic("unused") }
func (r *recorder) Fatalf(string, ...any) { panic("unused") }

// TestRequireFailsUnderMakeTest: without Ceph's tools on PATH a test that
// needs them skips, saying what is missing, except with EnvRequired set
// (make test), where it fails.
func TestRequireFailsUnderMakeTest(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	for _, required := range []string{"", "1"} {
		t.Setenv(ceph.EnvRequired, required)
		var r recorder
		ceph.Require(&r)
		got := r.skipped
		if required != "" {
			got = r.failed
			if r.skipped != "" {
				t.Errorf("%s=%q: skipped: %s", ceph.EnvRequired, required, r.skipped)
			}
		} else if r.failed != "" {
			t.Errorf("%s unset: failed: %s", ceph.EnvRequired, r.failed)
		}
		if !strings.Contains(got, "not found") && !strings.Contains(got, "needs root") {
			t.Errorf("%s=%q: ended with %q, want the missing tool named", ceph.EnvRequired, required, got)
		}
	}
}
