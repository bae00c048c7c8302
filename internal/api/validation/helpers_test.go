package validation

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

const testImageDir = "/var/lib/virtplane/images"

func ptr[T any](v T) *T { return &v }

// validVM exercises every part of the spec and passes validation.
func validVM() *apiv1.VirtualMachine {
	return &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{
			Name:        "web",
			Namespace:   "prod",
			Uid:         "6f1c2a3e-0000-4000-8000-000000000001",
			Labels:      map[string]string{"app": "web"},
			Annotations: map[string]string{"example.com/owner": "ops team"},
		},
		Spec: &apiv1.VirtualMachineSpec{
			RunStrategy:       "Always",
			NodeFailurePolicy: "RestartElsewhere",
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{
				Metadata: &apiv1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: &apiv1.VirtualMachineInstanceSpec{
					Domain: &apiv1.DomainSpec{
						Cpu:    &apiv1.CPU{Cores: 2, Sockets: 1, Threads: 1},
						Memory: &apiv1.Memory{Guest: "1Gi"},
						Devices: &apiv1.Devices{
							Disks: []*apiv1.Disk{
								{Name: "root", Disk: &apiv1.DiskTarget{Bus: "virtio"}, BootOrder: 1},
								{Name: "data", Disk: &apiv1.DiskTarget{Bus: "scsi"}, Serial: "data-01"},
								{Name: "cloudinit", Cdrom: &apiv1.CDRomTarget{Bus: "sata"}},
							},
							Interfaces: []*apiv1.Interface{
								{Name: "default", Model: "virtio", MacAddress: "02:00:00:00:00:01"},
							},
						},
					},
					Volumes: []*apiv1.Volume{
						{Name: "root", Image: &apiv1.ImageVolume{Name: "debian-12.qcow2"}},
						{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "10Gi"}},
						{Name: "cloudinit", CloudInitNoCloud: &apiv1.CloudInitNoCloud{UserData: "#cloud-config\n"}},
					},
					Networks:                      []*apiv1.Network{{Name: "default", User: &apiv1.UserNetwork{}}},
					NodeSelector:                  map[string]string{"kubernetes.io/arch": "amd64"},
					TerminationGracePeriodSeconds: ptr(int64(30)),
					EvictionStrategy:              "LiveMigrate",
				},
			},
		},
	}
}

// want is one expected error: its type and field path.
type want struct {
	typ   field.ErrorType
	field string
}

func (w want) String() string { return fmt.Sprintf("%s %s", w.field, w.typ) }

func got(errs field.ErrorList) []want {
	out := make([]want, 0, len(errs))
	for _, e := range errs {
		out = append(out, want{e.Type, e.Field})
	}
	return out
}

func sortedWants(ws []want) []string {
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = w.String()
	}
	sort.Strings(s)
	return s
}

// expectErrors fails unless errs are exactly wants (in any order).
func expectErrors(t *testing.T, errs field.ErrorList, wants ...want) {
	t.Helper()
	g, w := sortedWants(got(errs)), sortedWants(wants)
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Errorf("errors:\n  got  %q\n  want %q\nfull: %v", g, w, errs)
	}
}

// Shorthands for error types.
func required(f string) want     { return want{field.ErrorTypeRequired, f} }
func invalid(f string) want      { return want{field.ErrorTypeInvalid, f} }
func notSupported(f string) want { return want{field.ErrorTypeNotSupported, f} }
func duplicate(f string) want    { return want{field.ErrorTypeDuplicate, f} }
func notFound(f string) want     { return want{field.ErrorTypeNotFound, f} }
func forbidden(f string) want    { return want{field.ErrorTypeForbidden, f} }
func tooLong(f string) want      { return want{field.ErrorTypeTooLong, f} }
func tooMany(f string) want      { return want{field.ErrorTypeTooMany, f} }

// Common paths.
const (
	tspec   = "spec.template.spec"
	domain  = tspec + ".domain"
	devices = domain + ".devices"
	disks   = devices + ".disks"
	ifaces  = devices + ".interfaces"
	vols    = tspec + ".volumes"
	nets    = tspec + ".networks"
	kboot   = domain + ".firmware.kernel_boot"
)

func clone(vm *apiv1.VirtualMachine) *apiv1.VirtualMachine {
	return proto.Clone(vm).(*apiv1.VirtualMachine)
}

// tspecOf returns the template spec of vm (which must have one).
func tspecOf(vm *apiv1.VirtualMachine) *apiv1.VirtualMachineInstanceSpec {
	return vm.Spec.Template.Spec
}

func devicesOf(vm *apiv1.VirtualMachine) *apiv1.Devices { return vm.Spec.Template.Spec.Domain.Devices }
