package imagewait

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func testNode(name string, ready, schedulable, cordoned bool) *apiv1.Node {
	cond := apiv1.ConditionFalse
	if ready {
		cond = apiv1.ConditionTrue
	}
	return &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Spec:     &apiv1.NodeSpec{Unschedulable: cordoned},
		Status: &apiv1.NodeStatus{
			Schedulable: schedulable,
			Conditions:  []*apiv1.Condition{{Type: apiv1.ConditionReady, Status: cond}},
		},
	}
}

// imageWith is version rv of Image debian.qcow2 (uid-1) with entries,
// which are about it unless they say otherwise.
func imageWith(rv int64, entries ...*apiv1.ImageNodeStatus) *apiv1.Image {
	for _, e := range entries {
		if e.ImageUid == "" {
			e.ImageUid = "uid-1"
		}
	}
	return &apiv1.Image{
		Metadata: &apiv1.ObjectMeta{Name: "debian.qcow2", Uid: "uid-1", ResourceVersion: rv},
		Spec:     &apiv1.ImageSpec{Url: "https://x/debian.qcow2", Nodes: "all"},
		Status:   &apiv1.ImageStatus{Nodes: entries},
	}
}

func entry(node, phase string) *apiv1.ImageNodeStatus {
	return &apiv1.ImageNodeStatus{Node: node, Phase: phase, Attempts: 1}
}

func TestTargets(t *testing.T) {
	nodes := []*apiv1.Node{
		testNode("b", true, true, false), testNode("a", true, true, false),
		testNode("not-ready", false, true, false), testNode("unschedulable", true, false, false), testNode("cordoned", true, true, true),
		{Metadata: &apiv1.ObjectMeta{Name: "no-status"}},
	}
	if got := strings.Join(Targets(nodes), ","); got != "a,b" {
		t.Errorf("Targets = %s, want a,b (sorted; only ready, schedulable, uncordoned nodes)", got)
	}
	if Targets(nil) != nil {
		t.Error("Targets(nil) is not empty")
	}
}

func TestEntries(t *testing.T) {
	img := imageWith(1, entry("c", "Ready"), &apiv1.ImageNodeStatus{Node: "a", Phase: "Ready", ImageUid: "uid-0"}, entry("b", "Pulling"))
	// An entry no server stamped counts (see Entries).
	img.Status.Nodes = append(img.Status.Nodes, &apiv1.ImageNodeStatus{Node: "a2", Phase: "Failed"})
	var got []string
	for _, e := range Entries(img) {
		got = append(got, e.Node)
	}
	if strings.Join(got, ",") != "a2,b,c" {
		t.Errorf("Entries = %v, want a2,b,c: sorted, without a's entry about an earlier image", got)
	}
}

func TestJudge(t *testing.T) {
	a, b := testNode("a", true, true, false), testNode("b", true, true, false)
	notReady, unschedulable, cordoned := testNode("c", false, true, false), testNode("d", true, false, false), testNode("e", true, true, true)
	pulling := entry("b", "Pulling")
	pulling.BytesDone, pulling.BytesTotal, pulling.BytesPerSecond, pulling.EtaSeconds, pulling.Attempts = 512<<20, 1<<30, 2<<20, 256, 2
	failed := entry("b", "Failed")
	failed.Message, failed.Attempts = `image "debian.qcow2": checksum mismatch: got 00aa, want 5da2`, 3
	silent := entry("b", "Failed")
	const wait, done, fail = "wait", "done", "fail"
	for _, c := range []struct {
		name    string
		img     *apiv1.Image
		nodes   []*apiv1.Node
		want    string
		targets string
		says    string
	}{
		{"every node has it", imageWith(1, entry("a", "Ready"), entry("b", "Ready")), []*apiv1.Node{a, b}, done, "a,b", "2 of 2 nodes have it"},
		{"one still pulling", imageWith(1, entry("a", "Ready"), pulling), []*apiv1.Node{b, a}, wait, "a,b",
			"1 of 2 nodes have it; waiting for b (pulling: 50% of 1.0 GiB, 2.0 MiB/s, 4m16s left, attempt 2)"},
		{"one not started", imageWith(1, entry("a", "Ready")), []*apiv1.Node{a, b}, wait, "a,b", "waiting for b (not started)"},
		{"one failed", imageWith(1, entry("a", "Ready"), failed), []*apiv1.Node{a, b}, fail, "a,b",
			`node b could not pull image "debian.qcow2" (attempt 3): checksum mismatch: got 00aa, want 5da2`},
		{"a failure without a reason", imageWith(1, entry("a", "Ready"), silent), []*apiv1.Node{a, b}, fail, "a,b", "(attempt 1): no reason given"},
		{"only ready, schedulable, uncordoned nodes count", imageWith(1, entry("a", "Ready")),
			[]*apiv1.Node{a, notReady, unschedulable, cordoned}, done, "a", "1 of 1"},
		{"a failure elsewhere is not waited on", imageWith(1, entry("a", "Ready"), func() *apiv1.ImageNodeStatus {
			f := proto.Clone(failed).(*apiv1.ImageNodeStatus)
			f.Node = "c"
			return f
		}()), []*apiv1.Node{a, notReady}, done, "a", "1 of 1"},
		{"an entry about an earlier image does not count", imageWith(1, &apiv1.ImageNodeStatus{Node: "a", Phase: "Ready", ImageUid: "uid-0"}),
			[]*apiv1.Node{a}, wait, "a", "a (not started)"},
		{"no node", imageWith(1), []*apiv1.Node{notReady}, done, "", "no ready, schedulable node"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := Judge(c.img, c.nodes)
			got := wait
			switch {
			case v.Failed != nil:
				got = fail
				var pe *PullError
				if !errors.As(error(v.Failed), &pe) || pe.Node != "b" || pe.Image != "debian.qcow2" {
					t.Errorf("failure %v is not b's PullError about debian.qcow2", v.Failed)
				}
				if v.Done {
					t.Error("a failed verdict is also done")
				}
			case v.Done:
				got = done
			}
			if got != c.want || strings.Join(v.Targets, ",") != c.targets {
				t.Fatalf("verdict %s with targets %v (failed %v, state %q), want %s with %s", got, v.Targets, v.Failed, v.State, c.want, c.targets)
			}
			if !strings.Contains(v.State, c.says) {
				t.Errorf("state %q does not say %q", v.State, c.says)
			}
		})
	}
}
