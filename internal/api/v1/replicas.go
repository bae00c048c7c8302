package apiv1

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
)

// Names of the replica kinds (replicas.proto): the owner reference kinds
// of what their controllers create, the finalizers those controllers put
// on them, and their conditions (KubeVirt's).
const (
	KindReplicaSet = "VirtualMachineInstanceReplicaSet"
	KindPool       = "VirtualMachinePool"

	// FinalizerReplicaSet and FinalizerPool are added by their controllers,
	// which remove them once the instances or VMs are dealt with; the API
	// only honours them on delete.
	FinalizerReplicaSet = "virtplane.io/replicaset"
	FinalizerPool       = "virtplane.io/pool"

	// ConditionReplicaFailure: the last create or delete failed (reason
	// below, message the error); cleared by the next clean pass.
	ConditionReplicaFailure = "ReplicaFailure"
	// ConditionReplicaPaused: spec.paused is set and the controller stands
	// still (reason ReasonReplicaPaused).
	ConditionReplicaPaused = "ReplicaPaused"

	// LabelPoolRevision on a pool's VM (and its template, so its instance
	// gets it too) is the PoolRevision of the template the VM was made or
	// last updated from: a VM whose label is not the PoolRevision of the
	// pool's current template is due for the rollout, and an instance
	// whose label is not is still running an older template.
	LabelPoolRevision = "virtplane.io/pool-revision"
)

// Reasons of ReplicaFailure and ReplicaPaused (KubeVirt's).
const (
	ReasonReplicaPaused = "Paused"
	// Replica sets.
	ReasonFailedCreate = "FailedCreate"
	ReasonFailedDelete = "FailedDelete"
	// Pools.
	ReasonFailedScaleOut = "FailedScaleOut"
	ReasonFailedScaleIn  = "FailedScaleIn"
	ReasonFailedUpdate   = "FailedUpdate"
)

// Scale-in orders of a pool (spec.scale_in_order): which VMs go first when
// it shrinks. KubeVirt's sortPolicy, whose default (Random) surprised
// users (kubevirt#14800); here the highest ordinals go first, so a pool
// scaled from 5 to 3 keeps <pool>-0 to <pool>-2.
const (
	ScaleInDescendingOrder = "DescendingOrder"
	ScaleInAscendingOrder  = "AscendingOrder"
	ScaleInNewest          = "Newest"
	ScaleInOldest          = "Oldest"
)

// ScaleInOrders lists the scale-in orders, the default first.
func ScaleInOrders() []string {
	return []string{ScaleInDescendingOrder, ScaleInAscendingOrder, ScaleInNewest, ScaleInOldest}
}

// Defaults of the replica kinds' specs.
const (
	DefaultReplicas int32 = 1
	// DefaultMaxUnavailable lets a rollout restart every VM at once, as
	// KubeVirt's default does.
	DefaultMaxUnavailable = "100%"
	DefaultScaleInOrder   = ScaleInDescendingOrder
)

// Name lengths. Every name here is a DNS label (at most 63 characters),
// and so must the names of what the controllers make from it.
const (
	// ReplicaSetSuffixLen is the length of the random part of an
	// instance's name, <replica set>-<suffix>: as long as Kubernetes'
	// generateName suffix.
	ReplicaSetSuffixLen = 5
	// MaxReplicaSetNameLen leaves room for "-" and the suffix.
	MaxReplicaSetNameLen = 63 - 1 - ReplicaSetSuffixLen
	// MaxPoolNameLen leaves room for "-" and an ordinal of up to five
	// digits: ordinals are the lowest free ones, so they stay below the
	// replica count plus the VMs still being deleted.
	MaxPoolNameLen = 63 - 1 - 5
)

// DesiredReplicas is spec.replicas, DefaultReplicas when unset. Nil-safe.
func (s *VirtualMachineInstanceReplicaSetSpec) DesiredReplicas() int32 {
	if s == nil || s.Replicas == nil {
		return DefaultReplicas
	}
	return *s.Replicas
}

// DesiredReplicas is spec.replicas, DefaultReplicas when unset. Nil-safe.
func (s *VirtualMachinePoolSpec) DesiredReplicas() int32 {
	if s == nil || s.Replicas == nil {
		return DefaultReplicas
	}
	return *s.Replicas
}

// ReplicaSetInstanceName is a new name for an instance of replica set rs:
// "<rs>-<ReplicaSetSuffixLen random lowercase letters and digits>".
func ReplicaSetInstanceName(rs string) string {
	return rs + "-" + strings.ToLower(rand.Text()[:ReplicaSetSuffixLen])
}

// PoolVMName is the name of the VM with that ordinal in pool: "<pool>-<N>".
func PoolVMName(pool string, ordinal int) string {
	return pool + "-" + strconv.Itoa(ordinal)
}

// PoolOrdinal is the ordinal of vmName in pool, the inverse of PoolVMName.
// Only PoolVMName's own spelling counts: decimal digits, no sign, no
// leading zero but in "0". So "web-01" is no VM of pool "web", and
// "web-1-0" is one of pool "web-1", never of pool "web".
func PoolOrdinal(pool, vmName string) (int, bool) {
	rest, ok := strings.CutPrefix(vmName, pool+"-")
	// Nine digits cannot overflow an int; no name gets that far.
	if !ok || rest == "" || len(rest) > 9 || (rest[0] == '0' && rest != "0") {
		return 0, false
	}
	for _, c := range rest {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(rest)
	return n, err == nil
}

// PoolRevisionLen is the length of a PoolRevision: 10 hex digits (40
// bits), so two templates of one pool collide with odds of about one in
// a trillion.
const PoolRevisionLen = 10

// PoolRevision is the LabelPoolRevision value of a pool's VM template:
// the first PoolRevisionLen hex digits of the SHA-256 of its deterministic
// protobuf encoding. It names the template's content, not the pool's
// generation, so a change of replicas (or of anything else outside the
// template) rolls nothing, and a template changed and changed back is
// the revision the VMs already run. Fields at their zero value are not
// encoded, so a field added to the API later does not change the
// revision of templates that leave it unset (KubeVirt's hash-based
// revisions restarted every VM after upgrades, kubevirt#6970). The
// protobuf library does not promise the same bytes across its releases;
// in practice they are (fields in number order, map keys sorted), and a
// change there would cost one rollout, not correctness.
func PoolRevision(t *VirtualMachineTemplateSpec) string {
	// Marshal fails only on invalid UTF-8, which no decoded object holds
	// (proto3 decoding refuses it); such a template hashes as empty.
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(t)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:PoolRevisionLen]
}

// Matches reports whether labels hold every pair of the selector. A nil or
// empty selector matches nothing: validation refuses one, and a
// controller that met one anyway must not claim every object of the
// namespace.
func (s *LabelSelector) Matches(labels map[string]string) bool {
	if len(s.GetMatchLabels()) == 0 {
		return false
	}
	for k, v := range s.GetMatchLabels() {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// SelectorString is the selector in list-option syntax, pairs sorted by
// key ("app=web,tier=front"): status.label_selector, and what a client
// lists the selected objects with.
func SelectorString(s *LabelSelector) string {
	m := s.GetMatchLabels()
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + "=" + m[k]
	}
	return strings.Join(pairs, ",")
}

// ErrMaxUnavailable is what ParseMaxUnavailable refuses, by KubeVirt's
// rules (its IntOrString: an integer above 0, or a percentage 1%-100%).
var ErrMaxUnavailable = errors.New("must be a whole number of at least 1 (such as 1) or a percentage from 1% to 100% (such as 25%)")

// ParseMaxUnavailable reads a pool's max_unavailable: a whole number of
// VMs ("2"), or a percentage of the replicas ("25%"). Only the canonical
// spelling is accepted (no sign, no leading zero), so that what is stored
// reads one way.
func ParseMaxUnavailable(s string) (n int, percent bool, err error) {
	digits, percent := strings.CutSuffix(s, "%")
	if digits == "" || len(digits) > 9 || digits[0] == '0' {
		return 0, false, fmt.Errorf("%q %w", s, ErrMaxUnavailable)
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false, fmt.Errorf("%q %w", s, ErrMaxUnavailable)
		}
	}
	n, err = strconv.Atoi(digits)
	if err != nil || (percent && n > 100) {
		return 0, false, fmt.Errorf("%q %w", s, ErrMaxUnavailable)
	}
	return n, percent, nil
}

// MaxUnavailableCount is how many of replicas VMs max_unavailable s lets a
// rollout take down at once: the number, or the percentage of replicas
// rounded up (Kubernetes' GetScaledValueFromIntOrPercent with roundUp).
// Empty s is DefaultMaxUnavailable.
func MaxUnavailableCount(s string, replicas int32) (int, error) {
	if s == "" {
		s = DefaultMaxUnavailable
	}
	n, percent, err := ParseMaxUnavailable(s)
	if err != nil {
		return 0, err
	}
	if !percent {
		return n, nil
	}
	return (int(replicas)*n + 99) / 100, nil
}
