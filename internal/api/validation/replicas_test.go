package validation

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// validRS is a replica set of validVM's template, without what replicas
// cannot share (a MAC address, a persistent volume).
func validRS() *apiv1.VirtualMachineInstanceReplicaSet {
	tmpl := validVM().Spec.Template
	spec := tmpl.Spec
	spec.Domain.Devices.Interfaces[0].MacAddress = ""
	spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks[:1], spec.Domain.Devices.Disks[2:]...)
	spec.Volumes = append(spec.Volumes[:1], spec.Volumes[2:]...)
	return &apiv1.VirtualMachineInstanceReplicaSet{
		Metadata: &apiv1.ObjectMeta{Name: "web", Namespace: "prod", Uid: validVM().Metadata.Uid},
		Spec: &apiv1.VirtualMachineInstanceReplicaSetSpec{
			Replicas: ptr(int32(3)),
			Selector: &apiv1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: tmpl,
		},
	}
}

// validPool is a pool of validVM (persistent volume included), without its
// MAC address.
func validPool() *apiv1.VirtualMachinePool {
	vm := validVM()
	vm.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress = ""
	return &apiv1.VirtualMachinePool{
		Metadata: &apiv1.ObjectMeta{Name: "db", Namespace: "prod", Uid: vm.Metadata.Uid},
		Spec: &apiv1.VirtualMachinePoolSpec{
			Replicas: ptr(int32(3)),
			Selector: &apiv1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			VirtualMachineTemplate: &apiv1.VirtualMachineTemplateSpec{
				Metadata: &apiv1.ObjectMeta{Labels: map[string]string{"app": "db", "tier": "data"}},
				Spec:     vm.Spec,
			},
			MaxUnavailable: "1",
			ScaleInOrder:   apiv1.ScaleInOldest,
		},
	}
}

const (
	rsSpec   = "spec.template.spec"
	poolSpec = "spec.virtual_machine_template.spec"
	poolVMI  = poolSpec + ".template.spec"
)

func tooLongErr(f string) want { return want{field.ErrorTypeTooLong, f} }

func TestValidateReplicaSet(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*apiv1.VirtualMachineInstanceReplicaSet)
		want   []want
	}{
		{"valid", func(*apiv1.VirtualMachineInstanceReplicaSet) {}, nil},
		{"no replicas", func(rs *apiv1.VirtualMachineInstanceReplicaSet) { rs.Spec.Replicas = nil }, nil},
		{"zero replicas", func(rs *apiv1.VirtualMachineInstanceReplicaSet) { rs.Spec.Replicas = ptr(int32(0)) }, nil},
		{"most replicas", func(rs *apiv1.VirtualMachineInstanceReplicaSet) { rs.Spec.Replicas = ptr(int32(MaxReplicas)) }, nil},
		{"longest name", func(rs *apiv1.VirtualMachineInstanceReplicaSet) { rs.Metadata.Name = strings.Repeat("a", 57) }, nil},
		{"name too long for its instances", func(rs *apiv1.VirtualMachineInstanceReplicaSet) { rs.Metadata.Name = strings.Repeat("a", 58) },
			[]want{tooLongErr("metadata.name")}},
		{"name not a label", func(rs *apiv1.VirtualMachineInstanceReplicaSet) { rs.Metadata.Name = "Web" },
			[]want{invalid("metadata.name")}},
		{"negative replicas", func(rs *apiv1.VirtualMachineInstanceReplicaSet) { rs.Spec.Replicas = ptr(int32(-1)) },
			[]want{invalid("spec.replicas")}},
		{"too many replicas", func(rs *apiv1.VirtualMachineInstanceReplicaSet) { rs.Spec.Replicas = ptr(int32(MaxReplicas + 1)) },
			[]want{invalid("spec.replicas")}},
		{"no selector", func(rs *apiv1.VirtualMachineInstanceReplicaSet) { rs.Spec.Selector = nil },
			[]want{required("spec.selector")}},
		{"empty selector", func(rs *apiv1.VirtualMachineInstanceReplicaSet) { rs.Spec.Selector.MatchLabels = nil },
			[]want{required("spec.selector.match_labels")}},
		{"bad selector label", func(rs *apiv1.VirtualMachineInstanceReplicaSet) {
			rs.Spec.Selector.MatchLabels = map[string]string{"a b": "c"}
		},
			[]want{invalid("spec.selector.match_labels")}},
		{"selector not matching", func(rs *apiv1.VirtualMachineInstanceReplicaSet) { rs.Spec.Selector.MatchLabels["tier"] = "front" },
			[]want{invalid("spec.selector")}},
		{"template without labels", func(rs *apiv1.VirtualMachineInstanceReplicaSet) { rs.Spec.Template.Metadata = nil },
			[]want{invalid("spec.selector")}},
		{"bad template annotation", func(rs *apiv1.VirtualMachineInstanceReplicaSet) {
			rs.Spec.Template.Metadata.Annotations = map[string]string{"-x": ""}
		}, []want{invalid("spec.template.metadata.annotations")}},
		{"bad memory", func(rs *apiv1.VirtualMachineInstanceReplicaSet) { rs.Spec.Template.Spec.Domain.Memory.Guest = "1GB" },
			[]want{invalid(rsSpec + ".domain.memory.guest")}},
		{"fixed MAC", func(rs *apiv1.VirtualMachineInstanceReplicaSet) {
			rs.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress = "02:00:00:00:00:01"
		}, []want{forbidden(rsSpec + ".domain.devices.interfaces[0].mac_address")}},
		{"persistent volume", func(rs *apiv1.VirtualMachineInstanceReplicaSet) {
			rs.Spec.Template.Spec.Volumes[0] = &apiv1.Volume{Name: "root", Persistent: &apiv1.PersistentVolume{Size: "1Gi"}}
		}, []want{forbidden(rsSpec + ".volumes[0].persistent")}},
		{"no spec", func(rs *apiv1.VirtualMachineInstanceReplicaSet) { rs.Spec = nil }, []want{required("spec")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := validRS()
			tc.mutate(rs)
			expectErrors(t, ValidateReplicaSet(rs, Options{}), tc.want...)
		})
	}
}

func TestValidateReplicaSetMessages(t *testing.T) {
	rs := validRS()
	rs.Spec.Selector.MatchLabels = map[string]string{"app": "db"}
	errs := ValidateReplicaSet(rs, Options{})
	if len(errs) != 1 || errs[0].Error() != `spec.selector: Invalid value: "app=db": does not match the template's labels (spec.template.metadata.labels)` {
		t.Errorf("selector mismatch: %v", errs)
	}
	rs = validRS()
	rs.Metadata.Name = strings.Repeat("a", 58)
	if errs := ValidateReplicaSet(rs, Options{}); len(errs) != 1 || !strings.Contains(errs[0].Error(), "may not be more than 57 bytes: its instances are named <name>-<5 random characters>") {
		t.Errorf("long name: %v", errs)
	}
}

func TestValidateReplicaSetUpdate(t *testing.T) {
	old := validRS()
	next := validRS()
	next.Metadata.Labels = map[string]string{"new": "label"}
	next.Spec.Replicas = ptr(int32(7))
	next.Spec.Paused = true
	next.Spec.Template.Metadata.Labels["version"] = "2"
	expectErrors(t, ValidateReplicaSetUpdate(next, old, Options{}))

	next = validRS()
	next.Spec.Selector.MatchLabels = map[string]string{"app": "web", "version": "2"}
	next.Spec.Template.Metadata.Labels["version"] = "2"
	errs := ValidateReplicaSetUpdate(next, old, Options{})
	expectErrors(t, errs, invalid("spec.selector"))
	if len(errs) == 1 && !strings.HasSuffix(errs[0].Error(), ": selector is immutable after creation") {
		t.Errorf("message: %v", errs[0])
	}

	next = validRS()
	next.Metadata.Uid = "6f1c2a3e-0000-4000-8000-000000000002"
	next.Metadata.Name = "web2"
	expectErrors(t, ValidateReplicaSetUpdate(next, old, Options{}), invalid("metadata.uid"), invalid("metadata.name"))
}

func TestValidatePool(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*apiv1.VirtualMachinePool)
		want   []want
	}{
		{"valid", func(*apiv1.VirtualMachinePool) {}, nil},
		{"longest name", func(p *apiv1.VirtualMachinePool) { p.Metadata.Name = strings.Repeat("a", 57) }, nil},
		{"name too long for its VMs", func(p *apiv1.VirtualMachinePool) { p.Metadata.Name = strings.Repeat("a", 58) },
			[]want{tooLongErr("metadata.name")}},
		{"no namespace", func(p *apiv1.VirtualMachinePool) { p.Metadata.Namespace = "" }, []want{required("metadata.namespace")}},
		{"negative replicas", func(p *apiv1.VirtualMachinePool) { p.Spec.Replicas = ptr(int32(-5)) },
			[]want{invalid("spec.replicas")}},
		{"too many replicas", func(p *apiv1.VirtualMachinePool) { p.Spec.Replicas = ptr(int32(1 << 30)) },
			[]want{invalid("spec.replicas")}},
		{"no selector", func(p *apiv1.VirtualMachinePool) { p.Spec.Selector = nil }, []want{required("spec.selector")}},
		{"selector not matching", func(p *apiv1.VirtualMachinePool) { p.Spec.Selector.MatchLabels = map[string]string{"app": "web"} },
			[]want{invalid("spec.selector")}},
		{"no template", func(p *apiv1.VirtualMachinePool) { p.Spec.VirtualMachineTemplate = nil },
			[]want{invalid("spec.selector"), required("spec.virtual_machine_template")}},
		{"no run strategy", func(p *apiv1.VirtualMachinePool) { p.Spec.VirtualMachineTemplate.Spec.RunStrategy = "" },
			[]want{required(poolSpec + ".run_strategy")}},
		{"bad memory", func(p *apiv1.VirtualMachinePool) {
			p.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.Memory.Guest = "1GB"
		}, []want{invalid(poolVMI + ".domain.memory.guest")}},
		{"bad VM template label", func(p *apiv1.VirtualMachinePool) {
			p.Spec.VirtualMachineTemplate.Metadata.Labels["x"] = "a b"
		}, []want{invalid("spec.virtual_machine_template.metadata.labels[x]")}},
		{"fixed MAC", func(p *apiv1.VirtualMachinePool) {
			p.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.Devices.Interfaces[0].MacAddress = "02:00:00:00:00:01"
		}, []want{forbidden(poolVMI + ".domain.devices.interfaces[0].mac_address")}},
		{"max unavailable percent", func(p *apiv1.VirtualMachinePool) { p.Spec.MaxUnavailable = "25%" }, nil},
		{"max unavailable all", func(p *apiv1.VirtualMachinePool) { p.Spec.MaxUnavailable = "100%" }, nil},
		{"max unavailable 0", func(p *apiv1.VirtualMachinePool) { p.Spec.MaxUnavailable = "0" },
			[]want{invalid("spec.max_unavailable")}},
		{"max unavailable 0%", func(p *apiv1.VirtualMachinePool) { p.Spec.MaxUnavailable = "0%" },
			[]want{invalid("spec.max_unavailable")}},
		{"max unavailable 101%", func(p *apiv1.VirtualMachinePool) { p.Spec.MaxUnavailable = "101%" },
			[]want{invalid("spec.max_unavailable")}},
		{"max unavailable words", func(p *apiv1.VirtualMachinePool) { p.Spec.MaxUnavailable = "half" },
			[]want{invalid("spec.max_unavailable")}},
		{"scale-in order", func(p *apiv1.VirtualMachinePool) { p.Spec.ScaleInOrder = "Random" },
			[]want{notSupported("spec.scale_in_order")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := validPool()
			tc.mutate(p)
			expectErrors(t, ValidatePool(p, Options{}), tc.want...)
		})
	}
	p := validPool()
	p.Spec.Selector.MatchLabels["tier"] = "web"
	if errs := ValidatePool(p, Options{}); len(errs) != 1 || !strings.HasSuffix(errs[0].Error(), "does not match the template's labels (spec.virtual_machine_template.metadata.labels)") {
		t.Errorf("selector mismatch: %v", errs)
	}
}

func TestValidatePoolUpdate(t *testing.T) {
	old := validPool()
	next := validPool()
	next.Spec.VirtualMachineTemplate.Spec.Template.Spec.Domain.Memory.Guest = "2Gi"
	next.Spec.MaxUnavailable = "50%"
	expectErrors(t, ValidatePoolUpdate(next, old, Options{}))
	next.Spec.Selector.MatchLabels["tier"] = "data"
	expectErrors(t, ValidatePoolUpdate(next, old, Options{}), invalid("spec.selector"))
	expectErrors(t, ValidatePoolUpdate(next, nil, Options{}))

	// The template's persistent volumes are each VM's: they grow, never
	// shrink.
	withVolume := func(size string) *apiv1.VirtualMachinePool {
		p := validPool()
		s := p.Spec.VirtualMachineTemplate.Spec.Template.Spec
		s.Domain.Devices = &apiv1.Devices{Disks: []*apiv1.Disk{{Name: "data", Disk: &apiv1.DiskTarget{Bus: "virtio"}}}}
		s.Volumes = []*apiv1.Volume{{Name: "data", Persistent: &apiv1.PersistentVolume{Size: size}}}
		return p
	}
	expectErrors(t, ValidatePoolUpdate(withVolume("2Gi"), withVolume("1Gi"), Options{}))
	expectErrors(t, ValidatePoolUpdate(withVolume("1Gi"), withVolume("2Gi"), Options{}),
		invalid("spec.virtual_machine_template.spec.template.spec.volumes[0].persistent.size"))
}

func TestDefaultReplicaSet(t *testing.T) {
	rs := &apiv1.VirtualMachineInstanceReplicaSet{Spec: &apiv1.VirtualMachineInstanceReplicaSetSpec{
		Template: &apiv1.VirtualMachineInstanceTemplateSpec{Metadata: &apiv1.ObjectMeta{Name: "dropped", Labels: map[string]string{"app": "web"}}},
	}}
	DefaultReplicaSet(rs)
	once := proto.Clone(rs)
	DefaultReplicaSet(rs)
	if !proto.Equal(once, rs) {
		t.Errorf("not idempotent:\n%v\n%v", once, rs)
	}
	switch {
	case rs.Metadata.Namespace != apiv1.DefaultNamespace:
		t.Errorf("namespace %q", rs.Metadata.Namespace)
	case rs.Spec.GetReplicas() != 1:
		t.Errorf("replicas %v", rs.Spec.Replicas)
	case rs.Spec.Selector != nil:
		t.Error("a selector was made up")
	case rs.Spec.Template.Metadata.Name != "" || rs.Spec.Template.Metadata.Labels["app"] != "web":
		t.Errorf("template metadata %v", rs.Spec.Template.Metadata)
	case rs.Spec.Template.Spec.GracePeriodSeconds() != apiv1.DefaultTerminationGracePeriodSeconds || rs.Spec.Template.Spec.Domain.Cpu.Cores != 1:
		t.Errorf("template spec not defaulted: %v", rs.Spec.Template.Spec)
	}
	zero := &apiv1.VirtualMachineInstanceReplicaSet{Spec: &apiv1.VirtualMachineInstanceReplicaSetSpec{Replicas: ptr(int32(0))}}
	if DefaultReplicaSet(zero); zero.Spec.GetReplicas() != 0 {
		t.Error("replicas 0 defaulted to something else")
	}
}

func TestDefaultPool(t *testing.T) {
	p := &apiv1.VirtualMachinePool{}
	DefaultPool(p)
	once := proto.Clone(p)
	DefaultPool(p)
	if !proto.Equal(once, p) {
		t.Errorf("not idempotent:\n%v\n%v", once, p)
	}
	s := p.Spec
	if s.GetReplicas() != 1 || s.MaxUnavailable != "100%" || s.ScaleInOrder != "DescendingOrder" ||
		s.VirtualMachineTemplate.Spec.NodeFailurePolicy != apiv1.DefaultNodeFailurePolicy ||
		s.VirtualMachineTemplate.Spec.Template.Spec.Domain.Memory == nil {
		t.Errorf("defaults: %v", p)
	}

	p = validPool()
	p.Spec.MaxUnavailable, p.Spec.ScaleInOrder, p.Spec.VirtualMachineTemplate.Spec.NodeFailurePolicy = "", "", ""
	DefaultPool(p)
	if errs := ValidatePool(p, Options{}); len(errs) != 0 {
		t.Errorf("defaulted valid pool: %v", errs)
	}
}
