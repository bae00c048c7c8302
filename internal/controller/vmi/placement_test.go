package vmi

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/api/resource"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

const mi = int64(1) << 20

func defaults() Options {
	var o Options
	o.complete()
	return o
}

func TestRequest(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cpu        *apiv1.CPU
		mem        string
		ratio      int64
		overhead   string
		wantMilli  int64
		wantMemory int64
	}{
		{"one vCPU is KubeVirt's 100m", &apiv1.CPU{Cores: 1}, "1Gi", 0, "", 100, 1024*mi + 160*mi},
		{"cores x sockets x threads", &apiv1.CPU{Cores: 2, Sockets: 2, Threads: 2}, "512Mi", 0, "", 800, 672 * mi},
		{"unset counts are one", nil, "1Gi", 0, "", 100, 1184 * mi},
		{"ratio 3 rounds up", &apiv1.CPU{Cores: 1}, "1Gi", 3, "", 334, 1184 * mi},
		{"ratio 1 is dedicated", &apiv1.CPU{Cores: 4}, "1Gi", 1, "", 4000, 1184 * mi},
		{"overhead flag", &apiv1.CPU{Cores: 1}, "1Gi", 0, "256Mi", 100, 1280 * mi},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{CPUAllocationRatio: tc.ratio}
			if tc.overhead != "" {
				o.MemoryOverhead = resource.MustParse(tc.overhead)
			}
			o.complete()
			spec := &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Cpu: tc.cpu, Memory: &apiv1.Memory{Guest: tc.mem}}}
			got, err := request(spec, o)
			if err != nil {
				t.Fatal(err)
			}
			if got.milliCPU != tc.wantMilli || got.memory != tc.wantMemory {
				t.Fatalf("request = %dm, %dMi; want %dm, %dMi", got.milliCPU, got.memory/mi, tc.wantMilli, tc.wantMemory/mi)
			}
		})
	}
	if _, err := request(&apiv1.VirtualMachineInstanceSpec{}, defaults()); err == nil {
		t.Fatal("missing guest memory accepted")
	}
}

func TestChoose(t *testing.T) {
	// 1 vCPU (100m) and 1Gi + 160Mi overhead.
	req := resources{milliCPU: 100, memory: 1184 * mi}
	big := node("big", "4", "8Gi", nil)
	small := node("small", "4", "4Gi", nil)
	zoneA := node("a", "4", "8Gi", map[string]string{"zone": "a"})
	zoneB := node("b", "4", "8Gi", map[string]string{"zone": "b"})
	for _, tc := range []struct {
		name    string
		sel     map[string]string
		nodes   []candidate
		want    string
		message string
	}{
		{name: "fits", nodes: []candidate{{node: big}}, want: "big"},
		{
			name:  "spread: most free memory fraction after placement",
			nodes: []candidate{{node: big, used: resources{memory: 6 * 1024 * mi}}, {node: small, used: resources{memory: 1024 * mi}}},
			want:  "small",
		},
		{
			name:  "spread: fraction, not absolute free memory",
			nodes: []candidate{{node: big, used: resources{memory: 4 * 1024 * mi}}, {node: small}},
			want:  "small", // big: (4Gi-1184Mi)/8Gi ≈ 0.36; small: (4Gi-1184Mi)/4Gi ≈ 0.71
		},
		{name: "tie broken by name", nodes: []candidate{{node: zoneB}, {node: zoneA}}, want: "a"},
		{name: "selector", sel: map[string]string{"zone": "b"}, nodes: []candidate{{node: zoneA}, {node: zoneB}}, want: "b"},
		{
			name:    "insufficient memory",
			nodes:   []candidate{{node: small, used: resources{memory: 3 * 1024 * mi}}},
			message: "0/1 nodes are available: 1 Insufficient memory.",
		},
		{
			name:    "insufficient cpu",
			nodes:   []candidate{{node: node("n", "200m", "8Gi", nil), used: resources{milliCPU: 150}}},
			message: "0/1 nodes are available: 1 Insufficient cpu.",
		},
		{
			name:    "both resources on one node count twice",
			nodes:   []candidate{{node: node("n", "50m", "1Gi", nil)}},
			message: "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.",
		},
		{
			name:    "kube-scheduler's message",
			sel:     map[string]string{"zone": "a"},
			nodes:   []candidate{{node: zoneA, used: resources{memory: 7 * 1024 * mi}}, {node: zoneB}},
			message: "0/2 nodes are available: 1 Insufficient memory, 1 node(s) didn't match node selector.",
		},
		{
			name: "unusable nodes are skipped",
			nodes: []candidate{
				{node: withNode(big, func(n *apiv1.Node) { n.Metadata.Name = "cordoned"; n.Spec.Unschedulable = true })},
				{node: withNode(big, func(n *apiv1.Node) {
					n.Metadata.Name = "notready"
					n.Status.Conditions[0].Status = apiv1.ConditionFalse
				})},
				{node: withNode(big, func(n *apiv1.Node) {
					n.Metadata.Name = "fenced"
					n.Status.Conditions = append(n.Status.Conditions, &apiv1.Condition{Type: apiv1.ConditionNodeFenced, Status: apiv1.ConditionTrue})
				})},
				{node: withNode(big, func(n *apiv1.Node) { n.Metadata.Name = "agent"; n.Status.Schedulable = false })},
				{node: withNode(big, func(n *apiv1.Node) { n.Metadata.Name = "noready"; n.Status.Conditions = nil })},
			},
			message: "0/5 nodes are available: 1 node(s) had an agent that is not ready to run VMs, " +
				"1 node(s) were fenced, 1 node(s) were unschedulable, 2 node(s) were not ready.",
		},
		{
			name:  "unusable nodes skipped, a usable one chosen",
			nodes: []candidate{{node: withNode(big, func(n *apiv1.Node) { n.Spec.Unschedulable = true })}, {node: small}},
			want:  "small",
		},
		{
			name:    "missing allocatable is zero",
			nodes:   []candidate{{node: withNode(big, func(n *apiv1.Node) { n.Status.Allocatable = nil; n.Status.Capacity = nil })}},
			message: "0/1 nodes are available: 1 Insufficient cpu, 1 Insufficient memory.",
		},
		{
			name:  "capacity when allocatable is missing",
			nodes: []candidate{{node: withNode(big, func(n *apiv1.Node) { n.Status.Allocatable = nil })}},
			want:  "big",
		},
		{name: "no nodes", message: "0/0 nodes are available: no nodes are registered."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := choose(needs{req: req, sel: tc.sel}, nil, tc.nodes)
			if got.node != tc.want || got.message != tc.message {
				t.Fatalf("choose = %+v; want node %q message %q", got, tc.want, tc.message)
			}
		})
	}
}

func TestChooseExactFit(t *testing.T) {
	// A node whose free memory equals the request takes it.
	n := node("n", "100m", "1184Mi", nil)
	if got := choose(needs{req: resources{milliCPU: 100, memory: 1184 * mi}}, nil, []candidate{{node: n}}); got.node != "n" {
		t.Fatalf("exact fit refused: %+v", got)
	}
}

func TestAmountCapsHugeQuantities(t *testing.T) {
	if got := amount(resource.MustParse("1e40"), 0); got != maxAmount {
		t.Fatalf("1e40 → %d", got)
	}
	if got := amount(resource.MustParse("-1"), 0); got != 0 {
		t.Fatalf("-1 → %d", got)
	}
	if got := amount(resource.MustParse("1500m"), resource.Milli); got != 1500 {
		t.Fatalf("1500m → %d", got)
	}
}

func TestChooseImages(t *testing.T) {
	req := resources{milliCPU: 100, memory: 1184 * mi}
	withImages := func(name string, images ...string) *apiv1.Node {
		return withNode(node(name, "4", "8Gi", nil), func(n *apiv1.Node) {
			for _, img := range images {
				n.Status.Images = append(n.Status.Images, &apiv1.NodeImage{Name: img, Format: "raw"})
			}
		})
	}
	wanted := []string{"debian.qcow2", "vmlinuz"}
	for _, tc := range []struct {
		name     string
		images   []string
		pullable []string
		nodes    []candidate
		want     string
		message  string
	}{
		{
			name:     "an image nodes can pull does not filter; a node holding it is preferred over free memory",
			images:   wanted,
			pullable: []string{"debian.qcow2"},
			nodes:    []candidate{{node: withImages("a", "vmlinuz"), used: resources{memory: 2 * 1024 * mi}}, {node: withImages("b", "vmlinuz", "debian.qcow2"), used: resources{memory: 4 * 1024 * mi}}},
			want:     "b",
		},
		{
			name:     "without a holder the pull goes to the emptiest node",
			images:   wanted,
			pullable: []string{"debian.qcow2"},
			nodes:    []candidate{{node: withImages("a", "vmlinuz"), used: resources{memory: 2 * 1024 * mi}}, {node: withImages("b", "vmlinuz")}},
			want:     "b",
		},
		{
			name:     "an image that cannot be pulled still filters",
			images:   wanted,
			pullable: []string{"debian.qcow2"},
			nodes:    []candidate{{node: withImages("a", "other.raw")}},
			message:  `0/1 nodes are available: 1 node(s) didn't have the image(s). Missing image(s): "vmlinuz".`,
		},
		{
			name:   "only the node with every image fits",
			images: wanted,
			// b has more free memory but only one of the images.
			nodes: []candidate{{node: withImages("a", "debian.qcow2", "vmlinuz"), used: resources{memory: 4 * 1024 * mi}}, {node: withImages("b", "vmlinuz")}},
			want:  "a",
		},
		{
			name:   "a node that lists no images is not filtered",
			images: wanted,
			nodes:  []candidate{{node: node("fake", "4", "8Gi", nil)}},
			want:   "fake",
		},
		{name: "no images needed", nodes: []candidate{{node: withImages("a", "other.raw")}}, want: "a"},
		{
			name:    "the message names what is missing",
			images:  wanted,
			nodes:   []candidate{{node: withImages("a", "debian.qcow2")}, {node: withImages("b", "other.raw")}, {node: withImages("c"), used: resources{memory: 8 * 1024 * mi}}},
			message: `0/3 nodes are available: 1 Insufficient memory, 2 node(s) didn't have the image(s). Missing image(s): "debian.qcow2", "vmlinuz".`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := choose(needs{req: req, images: tc.images}, func(n string) bool { return slices.Contains(tc.pullable, n) }, tc.nodes)
			if got.node != tc.want || got.message != tc.message {
				t.Fatalf("choose = %+v; want node %q message %q", got, tc.want, tc.message)
			}
		})
	}
}

func TestRequiredImages(t *testing.T) {
	spec := &apiv1.VirtualMachineInstanceSpec{
		Domain: &apiv1.DomainSpec{Firmware: &apiv1.Firmware{KernelBoot: &apiv1.KernelBoot{Kernel: "boot/vmlinuz", Initrd: "./boot/initrd.img"}}},
		Volumes: []*apiv1.Volume{
			{Name: "root", Image: &apiv1.ImageVolume{Name: "debian.qcow2"}},
			{Name: "copy", Persistent: &apiv1.PersistentVolume{Image: "debian.qcow2", Size: "10Gi"}},
			{Name: "blank", Persistent: &apiv1.PersistentVolume{Size: "1Gi"}},
			{Name: "abs", Image: &apiv1.ImageVolume{Name: "/var/lib/virtplane/images/x.raw"}},
			{Name: "ci", CloudInitNoCloud: &apiv1.CloudInitNoCloud{}},
		},
	}
	inst := func(spec *apiv1.VirtualMachineInstanceSpec, ranBefore bool) *apiv1.VirtualMachineInstance {
		v := &apiv1.VirtualMachineInstance{Metadata: &apiv1.ObjectMeta{}, Spec: spec}
		if ranBefore {
			v.Metadata.Annotations = map[string]string{apiv1.AnnotationVMRanBefore: "true"}
		}
		return v
	}
	got := requiredImages(inst(spec, false))
	if want := []string{"boot/initrd.img", "boot/vmlinuz", "debian.qcow2"}; !slices.Equal(got, want) {
		t.Fatalf("requiredImages = %q, want %q", got, want)
	}
	if got := requiredImages(inst(&apiv1.VirtualMachineInstanceSpec{}, false)); len(got) != 0 {
		t.Fatalf("requiredImages(empty) = %q", got)
	}

	// Pinned to the node holding its persistent volumes: their images
	// were copied already and may be gone from the node.
	pinned := &apiv1.VirtualMachineInstanceSpec{
		NodeSelector: map[string]string{apiv1.LabelNodeName: "n1"},
		Volumes:      []*apiv1.Volume{{Name: "copy", Persistent: &apiv1.PersistentVolume{Image: "debian.qcow2", Size: "10Gi"}}},
	}
	if got := requiredImages(inst(pinned, false)); len(got) != 0 {
		t.Fatalf("requiredImages(pinned) = %q, want none", got)
	}

	// A volume on a storage class made at an earlier start: its image is
	// not needed where the VM runs next (a failover target), but a local
	// volume's, an image volume's and the kernel's still are.
	shared := &apiv1.VirtualMachineInstanceSpec{Volumes: []*apiv1.Volume{
		{Name: "data", Persistent: &apiv1.PersistentVolume{Image: "big.qcow2", Size: "10Gi", StorageClass: "ceph"}},
		{Name: "root", Image: &apiv1.ImageVolume{Name: "debian.qcow2"}},
	}}
	if got := requiredImages(inst(shared, false)); !slices.Equal(got, []string{"big.qcow2", "debian.qcow2"}) {
		t.Fatalf("first start: %q", got)
	}
	if got := requiredImages(inst(shared, true)); !slices.Equal(got, []string{"debian.qcow2"}) {
		t.Fatalf("VM that ran before: %q, want only the image volume's", got)
	}
}

// The controller passes the VMI's images to the choice: it lands on the
// node that has them, and waits with a message naming them when none does.
func TestPlaceByImages(t *testing.T) {
	withImage := func(n *apiv1.Node, img string) *apiv1.Node {
		return withNode(n, func(n *apiv1.Node) { n.Status.Images = []*apiv1.NodeImage{{Name: img, Format: "qcow2"}} })
	}
	needsImage := func(name, img string) *apiv1.VirtualMachineInstance {
		v := vmi(name, 1, "1Gi")
		v.Spec.Volumes = []*apiv1.Volume{{Name: "root", Image: &apiv1.ImageVolume{Name: img}}}
		return v
	}
	nodes := []*apiv1.Node{withImage(node("big", "4", "8Gi", nil), "other.qcow2"), withImage(node("small", "4", "4Gi", nil), "debian.qcow2")}
	f := newFixture(t, Options{}, nodes, needsImage("web", "debian.qcow2"), needsImage("lost", "missing.qcow2"))
	if _, err := f.reconcile("web"); err != nil {
		t.Fatal(err)
	}
	if got := f.stored("web").Status.NodeName; got != "small" {
		t.Errorf("web placed on %q, want small (the only node with its image)", got)
	}
	if _, err := f.reconcile("lost"); err != nil {
		t.Fatal(err)
	}
	c := apiv1.FindCondition(f.stored("lost").Status.Conditions, apiv1.ConditionPodScheduled)
	want := `0/2 nodes are available: 2 node(s) didn't have the image(s). Missing image(s): "missing.qcow2".`
	if c.GetStatus() != apiv1.ConditionFalse || c.GetReason() != ReasonUnschedulable || c.GetMessage() != want {
		t.Errorf("PodScheduled = %v; want False/%s %q", c, ReasonUnschedulable, want)
	}
}

// A node listing a new image lets waiting VMIs in at once; a heartbeat or
// a re-hash of an image it had does not wake them.
func TestPlacementRelevantChangeSeesImageNames(t *testing.T) {
	before := node("n", "4", "8Gi", nil)
	after := proto.Clone(before).(*apiv1.Node)
	after.Status.Images = []*apiv1.NodeImage{{Name: "debian.qcow2", Format: "qcow2"}}
	if !placementRelevantChange(before, after) {
		t.Fatal("a new image is not a placement-relevant change")
	}
	rehashed := proto.Clone(after).(*apiv1.Node)
	rehashed.Status.Images[0].Sha256 = strings.Repeat("a", 64)
	rehashed.Status.Heartbeat = timestamppb.Now()
	if placementRelevantChange(after, rehashed) {
		t.Fatal("a heartbeat and a new checksum of the same image count as placement-relevant")
	}
}
