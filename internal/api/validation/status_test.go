package validation

import (
	"fmt"
	"strings"
	"testing"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestToStatusError(t *testing.T) {
	if err := ToStatusError("VirtualMachine", "web", nil); err != nil {
		t.Fatalf("no errors gave %v", err)
	}
	if err := ToStatusError("VirtualMachine", "web", field.ErrorList{nil}); err != nil {
		t.Fatalf("nil error gave %v", err)
	}

	vm := validVM()
	vm.Spec.RunStrategy = "always"
	tspecOf(vm).Domain.Memory.Guest = "1GB"
	errs := ValidateVirtualMachine(vm, Options{})
	err := ToStatusError("VirtualMachine", "web", errs)

	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument {
		t.Fatalf("got %v, want InvalidArgument status", err)
	}
	wantMsg := `VirtualMachine "web" is invalid: ` +
		`spec.run_strategy: Unsupported value: "always": supported values: "Always", "RerunOnFailure", "Manual", "Halted", "Once"; ` +
		`spec.template.spec.domain.memory.guest: Invalid value: "1GB": must be a quantity such as 512Mi or 1Gi`
	if st.Message() != wantMsg {
		t.Errorf("message\n got  %s\n want %s", st.Message(), wantMsg)
	}

	check := func(t *testing.T, err error) {
		t.Helper()
		fv := FieldViolations(err)
		if len(fv) != len(errs) {
			t.Fatalf("got %d violations, want %d", len(fv), len(errs))
		}
		for i, e := range errs {
			if fv[i].GetField() != e.Field || fv[i].GetDescription() != e.ErrorBody() {
				t.Errorf("violation %d = %q %q, want %q %q", i, fv[i].GetField(), fv[i].GetDescription(), e.Field, e.ErrorBody())
			}
		}
	}
	t.Run("direct", func(t *testing.T) { check(t, err) })
	t.Run("wrapped", func(t *testing.T) { check(t, fmt.Errorf("create: %w", err)) })
	t.Run("over the wire", func(t *testing.T) {
		// What a client sees: the status proto marshalled and rebuilt.
		b, mErr := proto.Marshal(st.Proto())
		if mErr != nil {
			t.Fatal(mErr)
		}
		var p spb.Status
		if uErr := proto.Unmarshal(b, &p); uErr != nil {
			t.Fatal(uErr)
		}
		check(t, status.ErrorProto(&p))
	})

	if fv := FieldViolations(fmt.Errorf("plain")); fv != nil {
		t.Errorf("plain error gave %v", fv)
	}
	if fv := FieldViolations(status.Error(codes.NotFound, "x")); fv != nil {
		t.Errorf("status without details gave %v", fv)
	}
	if fv := FieldViolations(nil); fv != nil {
		t.Errorf("nil gave %v", fv)
	}
}

func TestToStatusErrorLimits(t *testing.T) {
	var errs field.ErrorList
	for i := 0; i < 150; i++ {
		errs = append(errs, field.Invalid(field.NewPath("spec").Index(i), strings.Repeat("x", 2000), "bad"))
	}
	errs = append(errs, field.Invalid(field.NewPath("spec", "\xff"), "\xfe", "not UTF-8"))
	err := ToStatusError("VirtualMachine", "web", errs)
	fv := FieldViolations(err)
	if len(fv) != maxReportedErrors {
		t.Fatalf("got %d violations, want %d", len(fv), maxReportedErrors)
	}
	if len(fv[0].GetDescription()) > maxErrorLen+len("…") {
		t.Errorf("description not clipped: %d bytes", len(fv[0].GetDescription()))
	}
	if msg := status.Convert(err).Message(); !strings.HasSuffix(msg, "; and 51 more errors") {
		t.Errorf("message ends %q", msg[len(msg)-40:])
	}

	// Invalid UTF-8 would make the detail unmarshalable; it is replaced.
	err = ToStatusError("VirtualMachine", "web", errs[150:])
	if fv := FieldViolations(err); len(fv) != 1 || fv[0].GetField() != "spec.\uFFFD" {
		t.Errorf("got %v", fv)
	}
}
