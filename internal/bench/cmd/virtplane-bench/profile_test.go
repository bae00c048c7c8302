package main

import (
	"slices"
	"testing"
)

func TestVirtplaneCum(t *testing.T) {
	out := `      flat  flat%   sum%        cum   cum%
         0     0%     0%     89.89s 67.77%  github.com/virtplane/terraform-provider-virtplane/internal/controller.Run.func1
     0.03s 0.023% 0.045%     86.86s 65.49%  github.com/virtplane/terraform-provider-virtplane/internal/controller/vmi.(*Controller).place
     0.84s  0.63% 23.12%     15.13s 11.41%  k8s.io/apimachinery/pkg/api/resource.ParseQuantity
    19.05s 14.36% 21.92%     43.07s 32.47%  github.com/virtplane/terraform-provider-virtplane/internal/controller/vmi.request
`
	got := virtplaneCum(out, 8)
	want := []string{"controller/vmi.(*Controller).place 65.49%", "controller/vmi.request 32.47%"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
