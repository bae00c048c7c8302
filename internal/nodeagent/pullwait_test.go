package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/imagepull"
)

// pullsWaiting stands in for the image puller: every instance waits.
type pullsWaiting struct{ w *imagepull.Wait }

func (p pullsWaiting) PullFor(context.Context, *apiv1.VirtualMachineInstance) error { return p.w }

// An instance whose image pull failed waits, not started, and shows why:
// a failure the node retries says so; one past the Image's bounds, which
// the node does not retry while they stay, says only what its error says
// (when the node tries again), never "retrying".
func TestPullFailureShownOnTheInstance(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		cause      error
	}{
		{"retried", "pulling image k.raw: HTTP 503 Service Unavailable (retrying)",
			fmt.Errorf("pulling image k.raw: %w", errors.New("HTTP 503 Service Unavailable"))},
		{"permanent", "pulling image k.raw: refused: more than max_size 64Mi; not tried again until spec.max_size or the server's image limits change, or the Image is re-created",
			fmt.Errorf("pulling image k.raw: %w", &imagepull.PermanentError{Err: errors.New("refused: more than max_size 64Mi")})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUnit(t)
			u.a.handler.pulls = pullsWaiting{&imagepull.Wait{After: time.Minute, Cause: tc.cause}}
			u.create("p")
			if d := u.mustReconcile("p"); d != time.Minute {
				t.Errorf("requeued after %v, want the Wait's minute", d)
			}
			st := u.vmis.get("p").Status
			c := apiv1.FindCondition(st.Conditions, apiv1.ConditionSynchronized)
			if c.GetStatus() != apiv1.ConditionFalse || c.GetReason() != ReasonImagePullFailed || c.GetMessage() != tc.want {
				t.Errorf("Synchronized %v, want %s %q", c, ReasonImagePullFailed, tc.want)
			}
			if st.Phase != apiv1.PhaseScheduled || u.fake.Count("Launch") != 0 {
				t.Errorf("phase %s, %d launches; want Scheduled and none", st.Phase, u.fake.Count("Launch"))
			}
		})
	}
}
