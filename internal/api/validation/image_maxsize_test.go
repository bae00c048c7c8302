package validation

import (
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestImageMaxSize(t *testing.T) {
	img := func(ms string) *apiv1.Image {
		return &apiv1.Image{Metadata: &apiv1.ObjectMeta{Name: "a.qcow2"}, Spec: &apiv1.ImageSpec{Url: "https://x/a.qcow2", MaxSize: ms}}
	}
	i := img("")
	DefaultImageMaxSize(i, 10<<30)
	if i.Spec.MaxSize != "10Gi" {
		t.Errorf("default: %q", i.Spec.MaxSize)
	}
	i = img("2048Mi")
	DefaultImage(i)
	DefaultImageMaxSize(i, 10<<30)
	if i.Spec.MaxSize != "2Gi" {
		t.Errorf("canonical: %q", i.Spec.MaxSize)
	}
	for _, bad := range []string{"0", "-1", "1.5", "2Ei", "x", "1e999999999"} {
		errs := ValidateImage(img(bad))
		if len(errs) != 1 || errs[0].Field != "spec.max_size" {
			t.Errorf("max_size %q: %v", bad, errs)
		}
		if _, ok := ByteQuantity(bad); ok {
			t.Errorf("ByteQuantity(%q) ok", bad)
		}
	}
	if n, ok := ByteQuantity("1Gi"); !ok || n != 1<<30 {
		t.Errorf("ByteQuantity(1Gi) = %d, %v", n, ok)
	}
	if errs := ValidateImageMaxSize(img("11Gi"), nil, 10<<30); len(errs) != 1 || errs[0].Field != "spec.max_size" ||
		!strings.Contains(errs[0].Detail, "at most 10Gi") {
		t.Errorf("above the cap: %v", errs)
	}
	if errs := ValidateImageMaxSize(img("10Gi"), nil, 10<<30); len(errs) != 0 {
		t.Errorf("at the cap: %v", errs)
	}
	// Kept on update although the cap is lower now; a change is checked.
	if errs := ValidateImageMaxSize(img("11264Mi"), img("11Gi"), 10<<30); len(errs) != 0 {
		t.Errorf("unchanged above a lowered cap: %v", errs)
	}
	if errs := ValidateImageMaxSize(img("12Gi"), img("11Gi"), 10<<30); len(errs) != 1 {
		t.Errorf("changed above the cap: %v", errs)
	}
}
