package validation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateImagePath(t *testing.T) {
	cases := []struct {
		path, imageDir string
		want           []want // at field "img"
	}{
		{"debian.qcow2", "", nil},
		{"debian/12/disk.qcow2", "", nil},
		{"a..b", "", nil},
		{"débian 12.qcow2", "", nil},
		// One image, one name: only the clean form.
		{"./debian.qcow2", "", []want{invalid("img")}},
		{"a//b", "", []want{invalid("img")}},
		{"sub/./x", "", []want{invalid("img")}},
		{"sub/", "", []want{invalid("img")}},
		// The image store's own files: checksum sidecars, imports.
		{".hidden.info.json", "", []want{invalid("img")}},
		{".debian.qcow2.info.json", "", []want{invalid("img")}},
		{"sub/.debian.qcow2.tmp-123", "", []want{invalid("img")}},
		{".sub/x", "", []want{invalid("img")}},
		{"..hidden.img", "", []want{invalid("img")}},
		{"a\nb", "", []want{invalid("img")}},
		{"a\x1b[2Jb", "", []want{invalid("img")}},
		{"a\xffb", "", []want{invalid("img")}},
		{strings.Repeat("a", 256), "", []want{invalid("img")}},
		{strings.Repeat("a", 255), "", nil},
		{"", "", []want{required("img")}},
		{"a\x00b", "", []want{invalid("img")}},
		{"..", "", []want{invalid("img")}},
		{"../x", "", []want{invalid("img")}},
		{"a/../b", "", []want{invalid("img")}},
		{"a/../../b", testImageDir, []want{invalid("img")}},
		{"a/..", "", []want{invalid("img")}},
		{".", "", []want{invalid("img")}},
		{"./", "", []want{invalid("img")}},
		{"/etc/passwd", "", []want{invalid("img")}},
		{"/etc/passwd", testImageDir, []want{invalid("img")}},
		{testImageDir + "/debian.qcow2", "", []want{invalid("img")}},
		{testImageDir + "/debian.qcow2", testImageDir, nil},
		{testImageDir + "/sub/debian.qcow2", testImageDir + "/", nil},
		{testImageDir + "//sub/./debian.qcow2", testImageDir + "/", []want{invalid("img")}},
		{testImageDir + "/.debian.qcow2.info.json", testImageDir, []want{invalid("img")}},
		{testImageDir + "/../secret", testImageDir, []want{invalid("img")}},
		{testImageDir, testImageDir, []want{invalid("img")}},
		{testImageDir + "/", testImageDir, []want{invalid("img")}},
		{testImageDir + "-old/x", testImageDir, []want{invalid("img")}},
		{testImageDir + "/x", "relative/dir", []want{invalid("img")}},
		{"/x", "/", nil},
		{"/", "/", []want{invalid("img")}},
		{strings.Repeat("a", 4097), "", []want{tooLong("img")}},
	}
	for _, tc := range cases {
		expectErrorsNamed(t, tc.path+" in "+tc.imageDir, ValidateImagePath(tc.path, field.NewPath("img"), tc.imageDir), tc.want...)
	}
}

func expectErrorsNamed(t *testing.T, name string, errs field.ErrorList, wants ...want) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		t.Helper()
		expectErrors(t, errs, wants...)
	})
}

func TestResolveImagePath(t *testing.T) {
	cases := []struct {
		imageDir, path, want string
		wantErr              bool
	}{
		{testImageDir, "debian.qcow2", testImageDir + "/debian.qcow2", false},
		{testImageDir + "/", "a/b.img", testImageDir + "/a/b.img", false},
		{testImageDir + "/", "./a//b.img", "", true},
		{testImageDir, testImageDir + "/x/../y", "", true},
		{testImageDir, testImageDir + "/./y", "", true},
		{testImageDir, testImageDir + "/y", testImageDir + "/y", false},
		{testImageDir, ".y.info.json", "", true},
		{testImageDir, "../../etc/shadow", "", true},
		{testImageDir, "/etc/shadow", "", true},
		{testImageDir, "", "", true},
		{"", "debian.qcow2", "", true},
		{"images", "debian.qcow2", "", true},
	}
	for _, tc := range cases {
		got, err := ResolveImagePath(tc.imageDir, tc.path)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("ResolveImagePath(%q, %q) = %q, %v; want %q, error %v", tc.imageDir, tc.path, got, err, tc.want, tc.wantErr)
		}
	}
}
