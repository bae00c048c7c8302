package command

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

var testNow = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func ago(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(testNow.Add(-d)) }

func testVM(name, status string, ready bool) *apiv1.VirtualMachine {
	return &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, CreationTimestamp: ago(3 * time.Hour)},
		Status:   &apiv1.VirtualMachineStatus{PrintableStatus: status, Ready: ready},
	}
}

func TestTableRows(t *testing.T) {
	vmi := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "prod", Name: "web", CreationTimestamp: ago(90 * time.Second)},
		Status: &apiv1.VirtualMachineInstanceStatus{
			Phase:    "Running",
			NodeName: "node-a",
			Interfaces: []*apiv1.InterfaceStatus{
				{Name: "default"},
				{Name: "second", IpAddresses: []string{"10.0.2.15", "fe80::1"}},
			},
			Conditions: []*apiv1.Condition{{Type: "Paused", Status: "False"}, {Type: "Ready", Status: "True"}},
		},
	}
	node := func(ready string, schedulable, unschedulable, kvm bool) *apiv1.Node {
		n := &apiv1.Node{
			Metadata: &apiv1.ObjectMeta{Name: "node-a", CreationTimestamp: ago(50 * time.Hour)},
			Spec:     &apiv1.NodeSpec{Unschedulable: unschedulable},
			Status: &apiv1.NodeStatus{
				Schedulable: schedulable,
				Allocatable: map[string]string{"cpu": "8", "memory": "15Gi"},
				NodeInfo:    &apiv1.NodeInfo{KvmUsable: kvm, AgentVersion: "v0.1.0"},
			},
		}
		if ready != "" {
			n.Status.Conditions = []*apiv1.Condition{{Type: "Ready", Status: ready}}
		}
		return n
	}

	withImages := func(n *apiv1.Node, names ...string) *apiv1.Node {
		for _, name := range names {
			n.Status.Images = append(n.Status.Images, &apiv1.NodeImage{Name: name})
		}
		return n
	}

	tests := []struct {
		name   string
		obj    object
		withNS bool
		want   []string
	}{
		{"vm", testVM("demo", "Running", true), false, []string{"demo", "3h", "Running", "True"}},
		{"vm -A", testVM("demo", "Stopped", false), true, []string{"default", "demo", "3h", "Stopped", "False"}},
		{"vm without status", &apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{Name: "new"}}, false, []string{"new", "<unknown>", "<none>", "False"}},
		{"vmi", vmi, false, []string{"web", "90s", "Running", "10.0.2.15", "node-a", "True"}},
		{"vmi -A", vmi, true, []string{"prod", "web", "90s", "Running", "10.0.2.15", "node-a", "True"}},
		{"vmi pending", &apiv1.VirtualMachineInstance{Metadata: &apiv1.ObjectMeta{Name: "p", CreationTimestamp: ago(0)}, Status: &apiv1.VirtualMachineInstanceStatus{Phase: "Pending"}},
			false, []string{"p", "0s", "Pending", "<none>", "<none>", "False"}},
		{"node ready", node("True", true, false, true), false, []string{"node-a", "Ready", "2d2h", "8", "15Gi", "kvm", "0", "v0.1.0"}},
		// -A does not add NAMESPACE to cluster-scoped nodes.
		{"node -A", node("True", true, false, true), true, []string{"node-a", "Ready", "2d2h", "8", "15Gi", "kvm", "0", "v0.1.0"}},
		{"node not ready, cordoned", node("False", true, true, false), false, []string{"node-a", "NotReady,SchedulingDisabled", "2d2h", "8", "15Gi", "tcg", "0", "v0.1.0"}},
		{"node unschedulable status", node("True", false, false, true), false, []string{"node-a", "Ready,SchedulingDisabled", "2d2h", "8", "15Gi", "kvm", "0", "v0.1.0"}},
		{"node without conditions", node("", true, false, true), false, []string{"node-a", "Unknown", "2d2h", "8", "15Gi", "kvm", "0", "v0.1.0"}},
		{"node with images", withImages(node("True", true, false, false), "debian.qcow2", "vmlinuz"), false,
			[]string{"node-a", "Ready", "2d2h", "8", "15Gi", "tcg", "2", "v0.1.0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := lookupResource(kindOf(tt.obj))
			if err != nil {
				t.Fatal(err)
			}
			got := tableRow(res, tt.obj, testNow, tt.withNS)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("tableRow = %q\nwant       %q", got, tt.want)
			}
		})
	}
}

func TestTableHeader(t *testing.T) {
	tests := []struct {
		res    *resource
		withNS bool
		want   []string
	}{
		{vmResource, false, []string{"NAME", "AGE", "STATUS", "READY"}},
		{vmResource, true, []string{"NAMESPACE", "NAME", "AGE", "STATUS", "READY"}},
		{vmiResource, false, []string{"NAME", "AGE", "PHASE", "IP", "NODENAME", "READY"}},
		{nodeResource, true, []string{"NAME", "STATUS", "AGE", "CPU", "MEMORY", "KVM", "IMAGES", "VERSION"}},
	}
	for _, tt := range tests {
		if got := tableHeader(tt.res, tt.withNS); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("tableHeader(%s, %v) = %q, want %q", tt.res.Kind, tt.withNS, got, tt.want)
		}
	}
}

func TestPrintTable(t *testing.T) {
	var b bytes.Buffer
	rows := [][]string{
		tableRow(vmResource, testVM("demo", "Running", true), testNow, false),
		tableRow(vmResource, testVM("a-much-longer-name", "Stopped", false), testNow, false),
	}
	if err := printTable(&b, tableHeader(vmResource, false), rows); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAME                 AGE   STATUS    READY\n" +
		"demo                 3h    Running   True\n" +
		"a-much-longer-name   3h    Stopped   False\n"
	if b.String() != want {
		t.Errorf("printTable:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestStreamTable(t *testing.T) {
	var b bytes.Buffer
	st, err := newStreamTable(&b, tableHeader(vmResource, false))
	if err != nil {
		t.Fatal(err)
	}
	for _, vm := range []*apiv1.VirtualMachine{
		testVM("demo", "Starting", false),
		testVM("demo", "Running", true),
		testVM("a-name-longer-than-twenty", "Stopped", false),
	} {
		if err := st.row(tableRow(vmResource, vm, testNow, false)); err != nil {
			t.Fatal(err)
		}
	}
	want := "" +
		"NAME                   AGE     STATUS         READY\n" +
		"demo                   3h      Starting       False\n" +
		"demo                   3h      Running        True\n" +
		"a-name-longer-than-twenty   3h      Stopped        False\n"
	if b.String() != want {
		t.Errorf("stream table:\n%s\nwant:\n%s", b.String(), want)
	}
}

// -o wide adds a node's bridges and libvirt networks, an instance's
// first address on each interface that has one, and a VM's persistent
// volumes with their storage classes.
func TestWideColumns(t *testing.T) {
	vmi := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Name: "web", CreationTimestamp: ago(time.Minute)},
		Status: &apiv1.VirtualMachineInstanceStatus{Interfaces: []*apiv1.InterfaceStatus{
			{Name: "default", IpAddress: "10.0.2.15", IpAddresses: []string{"10.0.2.15", "fec0::5054:ff:fe12:3456"}},
			{Name: "waiting", Info: "no DHCP lease for 02:aa:00:00:00:01"},
			{Name: "lan", IpAddresses: []string{"192.0.2.7"}},
		}},
	}
	node := &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{Name: "node-a"},
		Status:   &apiv1.NodeStatus{Bridges: []string{"br0", "vpguest0"}, Networks: []string{"default", "lan"}},
	}
	vm := testVM("demo", "Running", true)
	vm.Spec = &apiv1.VirtualMachineSpec{Template: &apiv1.VirtualMachineInstanceTemplateSpec{Spec: &apiv1.VirtualMachineInstanceSpec{}}}
	vm.Spec.Template.Spec.Volumes = []*apiv1.Volume{
		{Name: "root", Image: &apiv1.ImageVolume{Name: "debian.qcow2"}},
		{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "1Gi", StorageClass: "ceph"}},
		{Name: "logs", Persistent: &apiv1.PersistentVolume{Size: "1Gi", StorageClass: "local"}},
		{Name: "tmp", Persistent: &apiv1.PersistentVolume{Size: "1Gi"}},
	}
	tests := []struct {
		obj        object
		res        *resource
		header     []string
		cells      []string
		emptyCells []string
	}{
		{vmi, vmiResource, []string{"IPS"}, []string{"10.0.2.15,192.0.2.7"}, []string{"<none>"}},
		{node, nodeResource, []string{"BRIDGES", "NETWORKS"}, []string{"br0,vpguest0", "default,lan"}, []string{"<none>", "<none>"}},
		{vm, vmResource, []string{"STORAGE"}, []string{"data=ceph,logs=local,tmp=local"}, []string{"<none>"}},
		{testVM("demo", "Running", true), vmResource, []string{"STORAGE"}, []string{"<none>"}, []string{"<none>"}},
	}
	for _, tt := range tests {
		if got := wideHeader(tt.res); !reflect.DeepEqual(got, tt.header) {
			t.Errorf("wideHeader(%s) = %q, want %q", tt.res.Kind, got, tt.header)
		}
		if got := wideCells(tt.res, tt.obj); !reflect.DeepEqual(got, tt.cells) {
			t.Errorf("wideCells(%s) = %q, want %q", tt.res.Kind, got, tt.cells)
		}
		empty := proto.Clone(tt.obj).(object)
		proto.Reset(empty)
		if got := wideCells(tt.res, empty); !reflect.DeepEqual(got, tt.emptyCells) {
			t.Errorf("wideCells(empty %s) = %q, want %q", tt.res.Kind, got, tt.emptyCells)
		}
	}
}
