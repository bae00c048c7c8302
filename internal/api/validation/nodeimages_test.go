package validation

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestValidateNodeImages(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	img := func(name string) *apiv1.NodeImage {
		return &apiv1.NodeImage{Name: name, Format: "qcow2", VirtualSizeBytes: 1 << 30, SizeBytes: 1 << 20, Sha256: sum}
	}
	many := make([]*apiv1.NodeImage, MaxNodeImages+1)
	for i := range many {
		many[i] = img(fmt.Sprintf("i%d.raw", i))
	}
	// Few enough, but names near PATH_MAX: too large for a Node.
	var long []*apiv1.NodeImage
	for i := 0; NodeImageListSize(long) <= MaxNodeImageListBytes; i++ {
		long = append(long, img(fmt.Sprintf("%s/%04d.raw", strings.Repeat(strings.Repeat("d", 250)+"/", 15), i)))
	}
	cases := []struct {
		name   string
		images []*apiv1.NodeImage
		want   []want
	}{
		{"valid", []*apiv1.NodeImage{img("debian.qcow2"), img("os/vmlinuz")}, nil},
		{"none", nil, nil},
		{"absolute", []*apiv1.NodeImage{img("/var/lib/virtplane/images/a.raw")}, []want{invalid("status.images[0].name")}},
		{"climbs out", []*apiv1.NodeImage{img("../a.raw")}, []want{invalid("status.images[0].name")}},
		{"unclean", []*apiv1.NodeImage{img("os//a.raw")}, []want{invalid("status.images[0].name")}},
		{"no name", []*apiv1.NodeImage{img("")}, []want{required("status.images[0].name")}},
		{"duplicate", []*apiv1.NodeImage{img("a.raw"), img("b.raw"), img("a.raw")}, []want{duplicate("status.images[2].name")}},
		{"negative sizes", []*apiv1.NodeImage{{Name: "a.raw", VirtualSizeBytes: -1, SizeBytes: -1}},
			[]want{invalid("status.images[0].virtual_size_bytes"), invalid("status.images[0].size_bytes")}},
		{"bad checksum", []*apiv1.NodeImage{{Name: "a.raw", Sha256: strings.ToUpper(sum)}}, []want{invalid("status.images[0].sha256")}},
		{"too many", many, []want{{field.ErrorTypeTooMany, "status.images"}}},
		{"too large", long, []want{tooLong("status.images")}},
		{"store files", []*apiv1.NodeImage{img(".hidden.info.json"), img("os/.a.raw.tmp-1")},
			[]want{invalid("status.images[0].name"), invalid("status.images[1].name")}},
		{"not clean", []*apiv1.NodeImage{img("sub/./x")}, []want{invalid("status.images[0].name")}},
		{"unknown format", []*apiv1.NodeImage{{Name: "a.vmdk", Format: "vmdk"}}, []want{notSupported("status.images[0].format")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := validNode()
			n.Status.Images = tc.images
			expectErrors(t, ValidateNode(n), tc.want...)
		})
	}
}

func TestImageName(t *testing.T) {
	for _, tc := range []struct {
		ref, dir, want string
		ok             bool
	}{
		{"debian.qcow2", "", "debian.qcow2", true},
		{"./os//vmlinuz", "", "os/vmlinuz", true},
		{"/var/lib/virtplane/images/os/vmlinuz", testImageDir, "os/vmlinuz", true},
		{"/var/lib/virtplane/images/os/vmlinuz", "", "", false},          // where nodes keep it is unknown
		{"/var/lib/virtplane/images-old/a.raw", testImageDir, "", false}, // outside
		{"/var/lib/virtplane/images", testImageDir, "", false},
		{"", "", "", false},
		{".", "", "", false},
		{"a/../../b", "", "", false},
	} {
		if got, ok := ImageName(tc.ref, tc.dir); got != tc.want || ok != tc.ok {
			t.Errorf("ImageName(%q, %q) = %q, %v; want %q, %v", tc.ref, tc.dir, got, ok, tc.want, tc.ok)
		}
	}
}

func TestValidatePersistentImageSizes(t *testing.T) {
	const gi = int64(1) << 30
	nodes := []*apiv1.Node{
		{Status: &apiv1.NodeStatus{Images: []*apiv1.NodeImage{{Name: "debian.qcow2", VirtualSizeBytes: 2 * gi}}}},
		// Another node's copy of the name is larger: the largest counts.
		{Status: &apiv1.NodeStatus{Images: []*apiv1.NodeImage{{Name: "debian.qcow2", VirtualSizeBytes: 3 * gi}, {Name: "odd.raw", VirtualSizeBytes: gi + 512}}}},
		{},
	}
	sizes := NodeImageSizes(nodes)
	spec := func(vols ...*apiv1.Volume) *apiv1.VirtualMachineInstanceSpec {
		return &apiv1.VirtualMachineInstanceSpec{Volumes: vols}
	}
	pv := func(name, image, size string) *apiv1.Volume {
		return &apiv1.Volume{Name: name, Persistent: &apiv1.PersistentVolume{Image: image, Size: size}}
	}
	path := field.NewPath("spec", "template", "spec")
	for _, tc := range []struct {
		name      string
		spec, old *apiv1.VirtualMachineInstanceSpec
		dir       string
		want      string // the one error, "" for none
	}{
		{name: "large enough", spec: spec(pv("root", "debian.qcow2", "3Gi"))},
		{name: "no image", spec: spec(pv("data", "", "1Mi"))},
		{name: "image no node has", spec: spec(pv("root", "other.qcow2", "1Mi"))},
		{
			name: "smaller than the largest copy",
			spec: spec(&apiv1.Volume{Name: "root", Image: &apiv1.ImageVolume{Name: "debian.qcow2"}}, pv("data", "debian.qcow2", "2Gi")),
			want: `spec.template.spec.volumes[1].persistent.size: Invalid value: "2Gi": must be at least the virtual size of image "debian.qcow2" (3221225472 bytes / 3Gi)`,
		},
		{
			name: "absolute path inside the image directory",
			spec: spec(pv("root", testImageDir+"/debian.qcow2", "1Gi")), dir: testImageDir,
			want: `spec.template.spec.volumes[0].persistent.size: Invalid value: "1Gi": must be at least the virtual size of image "debian.qcow2" (3221225472 bytes / 3Gi)`,
		},
		{
			name: "size not whole MiB is rounded up",
			spec: spec(pv("root", "odd.raw", "1Gi")),
			want: `spec.template.spec.volumes[0].persistent.size: Invalid value: "1Gi": must be at least the virtual size of image "odd.raw" (1073742336 bytes / 1025Mi rounded up)`,
		},
		{name: "unchanged volume of an update is not checked again", spec: spec(pv("root", "debian.qcow2", "1Gi")), old: spec(pv("root", "debian.qcow2", "1Gi"))},
		{
			name: "changed volume of an update is checked",
			spec: spec(pv("root", "debian.qcow2", "1Gi")), old: spec(pv("root", "debian.qcow2", "4Gi")),
			want: `spec.template.spec.volumes[0].persistent.size: Invalid value: "1Gi": must be at least the virtual size of image "debian.qcow2" (3221225472 bytes / 3Gi)`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := ValidatePersistentImageSizes(tc.spec, tc.old, path, sizes, tc.dir)
			var got string
			if len(errs) > 1 {
				t.Fatalf("want at most one error, got %v", errs)
			}
			if len(errs) == 1 {
				got = errs[0].Error()
			}
			if got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
			if needs := NeedsImageSizes(tc.spec, tc.old, tc.dir); tc.want != "" && !needs {
				t.Error("NeedsImageSizes = false for a spec with an error")
			}
		})
	}
}
