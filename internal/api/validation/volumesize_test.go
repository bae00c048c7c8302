package validation

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestVolumeBytesRoundsUpToSectors(t *testing.T) {
	for size, want := range map[string]int64{
		"64Mi":      64 << 20,
		"100M":      100000256, // what qemu-img create makes of 100000000
		"512":       512,
		"1":         512,
		"513":       1024,
		"1Ei":       1 << 60,
		"134217728": 128 << 20,
	} {
		got, err := VolumeBytes(size)
		if err != nil || got != want {
			t.Errorf("VolumeBytes(%q) = %d, %v; want %d", size, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "-1Mi", "2Ei", "1.5", "lots"} {
		if got, err := VolumeBytes(bad); err == nil {
			t.Errorf("VolumeBytes(%q) = %d, want an error", bad, got)
		}
	}
}

func specWithVolumes(vols ...*apiv1.Volume) *apiv1.VirtualMachineInstanceSpec {
	return &apiv1.VirtualMachineInstanceSpec{Volumes: vols}
}

func pvol(name, size, image string) *apiv1.Volume {
	return &apiv1.Volume{Name: name, Persistent: &apiv1.PersistentVolume{Size: size, Image: image}}
}

func TestPersistentVolumeUpdate(t *testing.T) {
	root := field.NewPath("spec", "template", "spec")
	old := specWithVolumes(
		&apiv1.Volume{Name: "root", Image: &apiv1.ImageVolume{Name: "debian.qcow2"}},
		pvol("data", "128Mi", ""),
		pvol("db", "1Gi", "seed.qcow2"),
	)
	cases := []struct {
		name string
		next *apiv1.VirtualMachineInstanceSpec
		want []string // "field: detail fragment"
	}{
		{"unchanged", proto.Clone(old).(*apiv1.VirtualMachineInstanceSpec), nil},
		{"grown", specWithVolumes(old.Volumes[0], pvol("data", "256Mi", ""), pvol("db", "2Gi", "seed.qcow2")), nil},
		{"same value, other spelling", specWithVolumes(pvol("data", "134217728", "")), nil},
		{"shrunk", specWithVolumes(old.Volumes[0], pvol("data", "64Mi", ""), old.Volumes[2]), []string{
			"spec.template.spec.volumes[1].persistent.size: may not shrink from 128Mi to 64Mi",
		}},
		// The index is the new spec's, where the user's value is.
		{"shrunk and moved", specWithVolumes(pvol("db", "512Mi", "seed.qcow2")), []string{
			"spec.template.spec.volumes[0].persistent.size: may not shrink from 1Gi to 512Mi",
		}},
		{"image changed", specWithVolumes(pvol("db", "1Gi", "other.qcow2")), []string{
			`spec.template.spec.volumes[0].persistent.image: may not change from "seed.qcow2" to "other.qcow2"`,
		}},
		{"image added to a blank volume", specWithVolumes(pvol("data", "128Mi", "seed.qcow2")), []string{
			`spec.template.spec.volumes[0].persistent.image: may not change from none (a blank disk) to "seed.qcow2"`,
		}},
		{"image removed", specWithVolumes(pvol("db", "1Gi", "")), []string{
			`spec.template.spec.volumes[0].persistent.image: may not change from "seed.qcow2" to none (a blank disk)`,
		}},
		{"renamed: a new volume", specWithVolumes(pvol("data2", "1Mi", "other.qcow2")), nil},
		{"removed", specWithVolumes(), nil},
		{"was an image volume", specWithVolumes(pvol("root", "1Mi", "")), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := ValidatePersistentVolumeUpdate(tc.next, old, root)
			if len(errs) != len(tc.want) {
				t.Fatalf("errors %v, want %d: %v", errs, len(tc.want), tc.want)
			}
			for i, e := range errs {
				field, frag, _ := strings.Cut(tc.want[i], ": ")
				if e.Field != field || !strings.Contains(e.Detail, frag) || e.Type != "FieldValueInvalid" {
					t.Errorf("error %d = %s (%s: %s), want %s", i, e, e.Field, e.Detail, tc.want[i])
				}
			}
		})
	}
}

// The API refuses the update, with the field named and the sizes said.
func TestVirtualMachineUpdateRefusesShrink(t *testing.T) {
	old := validVM()
	next := proto.Clone(old).(*apiv1.VirtualMachine)
	next.Spec.Template.Spec.Volumes[1].Persistent.Size = "5Gi"
	errs := ValidateVirtualMachineUpdate(next, old, Options{ImageDir: testImageDir})
	if len(errs) != 1 {
		t.Fatalf("errors %v, want one", errs)
	}
	if got := errs[0].Error(); got != `spec.template.spec.volumes[1].persistent.size: Invalid value: "5Gi": may not shrink from 10Gi to 5Gi: `+
		`a persistent volume only grows (rename the disk to get a new, smaller volume)` {
		t.Fatalf("error %q", got)
	}
	next.Spec.Template.Spec.Volumes[1].Persistent.Size = "20Gi"
	if errs := ValidateVirtualMachineUpdate(next, old, Options{ImageDir: testImageDir}); len(errs) != 0 {
		t.Fatalf("growth refused: %v", errs)
	}
}

// LiveDisks's part in volume growth (GrowVolumes' cases before it took
// them over): only sizes that grow are taken, anything else of a
// volume's waits for a restart.
func TestLiveDisksGrowVolumes(t *testing.T) {
	// withDisks is a spec of vols, each with its disk.
	withDisks := func(vols []*apiv1.Volume) *apiv1.VirtualMachineInstanceSpec {
		s := &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Devices: &apiv1.Devices{}}, Volumes: vols}
		for _, v := range vols {
			s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, &apiv1.Disk{Name: v.GetName()})
		}
		return s
	}
	have := []*apiv1.Volume{
		{Name: "root", Image: &apiv1.ImageVolume{Name: "debian.qcow2"}},
		pvol("data", "64Mi", ""),
		pvol("db", "1Gi", "seed.qcow2"),
	}
	orig := cloneVolumes(have)
	cases := []struct {
		name string
		want []*apiv1.Volume
		ok   bool
	}{
		{"equal", cloneVolumes(have), true},
		{"one grown", []*apiv1.Volume{have[0], pvol("data", "128Mi", ""), have[2]}, true},
		{"both grown", []*apiv1.Volume{have[0], pvol("data", "65Mi", ""), pvol("db", "1Ti", "seed.qcow2")}, true},
		{"same value, other spelling", []*apiv1.Volume{have[0], pvol("data", "67108864", ""), have[2]}, true},
		{"shrunk", []*apiv1.Volume{have[0], pvol("data", "32Mi", ""), have[2]}, false},
		{"grown and shrunk", []*apiv1.Volume{have[0], pvol("data", "128Mi", ""), pvol("db", "512Mi", "seed.qcow2")}, false},
		{"grown and image changed", []*apiv1.Volume{have[0], pvol("data", "128Mi", ""), pvol("db", "1Gi", "x.qcow2")}, false},
		{"grown and renamed", []*apiv1.Volume{have[0], pvol("data2", "128Mi", ""), have[2]}, false},
		{"grown and another image volume", []*apiv1.Volume{{Name: "root", Image: &apiv1.ImageVolume{Name: "x.qcow2"}}, pvol("data", "128Mi", ""), have[2]}, false},
		{"added", append(cloneVolumes(have), pvol("more", "1Mi", "")), false},
		{"removed", have[:2], false},
		{"reordered", []*apiv1.Volume{have[0], have[2], have[1]}, false},
		{"a persistent volume became an image one", []*apiv1.Volume{have[0], {Name: "data", Image: &apiv1.ImageVolume{Name: "x"}}, have[2]}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := LiveDisks(withDisks(tc.want), withDisks(have))
			got := c.Volumes
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if ok {
				for i := range got {
					// Sizes equal in value are taken as the template
					// writes them, so the instance then equals it.
					if !proto.Equal(got[i], tc.want[i]) {
						t.Errorf("volume %d = %v, want %v", i, got[i], tc.want[i])
					}
				}
			}
			for i := range have {
				if !proto.Equal(have[i], orig[i]) {
					t.Fatalf("have changed: %v", have)
				}
			}
		})
	}
}

func cloneVolumes(vs []*apiv1.Volume) []*apiv1.Volume {
	out := make([]*apiv1.Volume, len(vs))
	for i, v := range vs {
		out[i] = proto.Clone(v).(*apiv1.Volume)
	}
	return out
}
