// Package imagewait decides whether the nodes have pulled an Image (API
// object) and follows the Image and the nodes until they have: the one
// definition of "waiting for the nodes to pull an image" that the
// Terraform provider (virtplane_image with nodes = "all") and the CLI
// (image create --wait, image get NAME -w) share.
//
// Judge is a pure function of the Image and the nodes, testable without
// an agent; Watcher feeds it from two watches, the Image's and the
// nodes': a node that joins, leaves or stops answering changes what is
// waited for as much as a pull does.
package imagewait

import (
	"fmt"
	"sort"
	"strings"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// Target says whether a node is one whose pull is waited for: ready (its
// agent answers), schedulable (it may run the instances that would use
// the image) and not cordoned. Others pull the image when they come
// back, which nobody can wait for.
func Target(n *apiv1.Node) bool {
	st := n.GetStatus()
	return apiv1.IsConditionTrue(st.GetConditions(), apiv1.ConditionReady) && st.GetSchedulable() && !n.GetSpec().GetUnschedulable()
}

// Targets are the names of the target nodes among nodes, sorted.
func Targets(nodes []*apiv1.Node) []string {
	var out []string
	for _, n := range nodes {
		if Target(n) {
			out = append(out, n.GetMetadata().GetName())
		}
	}
	sort.Strings(out)
	return out
}

// Entries are the nodes' status entries about img itself, sorted by
// node. A node may still hold an entry about an earlier Image of the same
// name until it reports again; that entry says nothing about this one.
// An entry without an image uid counts: the API server stamps every
// entry it stores, so only an object that did not come through it (a
// test's) lacks one, and it cannot be about another Image.
func Entries(img *apiv1.Image) []*apiv1.ImageNodeStatus {
	uid := img.GetMetadata().GetUid()
	var out []*apiv1.ImageNodeStatus
	for _, e := range img.GetStatus().GetNodes() {
		if e.GetImageUid() == "" || e.GetImageUid() == uid {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetNode() < out[j].GetNode() })
	return out
}

// PullError is a node's report that it could not pull the image.
type PullError struct {
	Node, Image string
	// Message is the node's reason, without the image's name it starts
	// with.
	Message  string
	Attempts int32
}

func (e *PullError) Error() string {
	return fmt.Sprintf("node %s could not pull image %q (attempt %d): %s", e.Node, e.Image, e.Attempts, e.Message)
}

// Verdict is where the pulls stand.
type Verdict struct {
	// Targets are the nodes waited for (see Target), sorted.
	Targets []string
	// Done: every target has the image (also when there is no target:
	// nothing is left to wait for).
	Done bool
	// Failed is set when a target reported that it could not pull the
	// image.
	Failed *PullError
	// State says what is still awaited, for logs and timeout messages:
	// "1 of 2 nodes have it; waiting for b (pulling: 50% of 1.0 GiB)".
	State string
}

// Judge decides whether every target node has img, or one reported that
// it could not pull it. A node's failure is the verdict although the
// node tries again: a wrong checksum or a dead URL do not mend
// themselves, and a transient failure is better reported than waited
// out in silence.
func Judge(img *apiv1.Image, nodes []*apiv1.Node) Verdict {
	v := Verdict{Targets: Targets(nodes)}
	if len(v.Targets) == 0 {
		v.Done, v.State = true, "no ready, schedulable node"
		return v
	}
	entries := map[string]*apiv1.ImageNodeStatus{}
	for _, e := range Entries(img) {
		entries[e.GetNode()] = e
	}
	name := img.GetMetadata().GetName()
	var waiting []string
	for _, n := range v.Targets {
		e := entries[n]
		switch e.GetPhase() {
		case validation.ImagePhaseReady:
		case validation.ImagePhaseFailed:
			// The node's message starts with the image's name, which the
			// error says already.
			msg := strings.TrimPrefix(e.GetMessage(), fmt.Sprintf("image %q: ", name))
			if msg == "" {
				msg = "no reason given"
			}
			v.Failed = &PullError{Node: n, Image: name, Message: msg, Attempts: e.GetAttempts()}
			v.State = v.Failed.Error()
			return v
		case validation.ImagePhasePulling:
			waiting = append(waiting, n+" (pulling: "+Progress(e)+")")
		default:
			waiting = append(waiting, n+" (not started)")
		}
	}
	v.Done = len(waiting) == 0
	v.State = fmt.Sprintf("%d of %d nodes have it", len(v.Targets)-len(waiting), len(v.Targets))
	if len(waiting) > 0 {
		v.State += "; waiting for " + strings.Join(waiting, ", ")
	}
	return v
}
