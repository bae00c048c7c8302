package apiv1

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// Condition status values.
const (
	ConditionTrue    = "True"
	ConditionFalse   = "False"
	ConditionUnknown = "Unknown"
)

// FindCondition returns the condition of type t, or nil.
func FindCondition(conds []*Condition, t string) *Condition {
	for _, c := range conds {
		if c.GetType() == t {
			return c
		}
	}
	return nil
}

// SetCondition adds or replaces the condition of c's type. The transition
// time changes only when the status does, as in Kubernetes.
func SetCondition(conds []*Condition, c *Condition, now time.Time) []*Condition {
	for i, old := range conds {
		if old.GetType() != c.Type {
			continue
		}
		if old.GetStatus() == c.Status && old.GetLastTransitionTime() != nil {
			c.LastTransitionTime = old.LastTransitionTime
		} else {
			c.LastTransitionTime = timestamppb.New(now)
		}
		conds[i] = c
		return conds
	}
	c.LastTransitionTime = timestamppb.New(now)
	return append(conds, c)
}

// RemoveCondition drops the condition of type t.
func RemoveCondition(conds []*Condition, t string) []*Condition {
	out := conds[:0]
	for _, c := range conds {
		if c.GetType() != t {
			out = append(out, c)
		}
	}
	return out
}

// IsConditionTrue reports whether conds has a condition of type t with
// status True.
func IsConditionTrue(conds []*Condition, t string) bool {
	return FindCondition(conds, t).GetStatus() == ConditionTrue
}
