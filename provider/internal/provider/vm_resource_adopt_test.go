package provider

import (
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func TestParseAdoptID(t *testing.T) {
	for id, want := range map[string][4]string{
		"node-a/legacy-web":          {"node-a", "legacy-web", "default", "legacy-web"},
		"node-a/Legacy.Web/prod/web": {"node-a", "Legacy.Web", "prod", "web"},
	} {
		n, d, ns, name, err := parseAdoptID(id)
		if err != nil || [4]string{n, d, ns, name} != want {
			t.Errorf("parseAdoptID(%q) = %s %s %s %s, %v; want %v", id, n, d, ns, name, err, want)
		}
	}
	for id, msg := range map[string]string{
		"node-a":                      "want adopt:NODE/DOMAIN",
		"node-a/a/b":                  "want adopt:NODE/DOMAIN",
		"node-a/Legacy.Web":           "NAMESPACE/NAME",
		"node-a/../etc":               "DOMAIN",
		"Node_A/web":                  "NODE",
		"node-a/web/prod/Not_A_Label": "VM.name",
	} {
		if _, _, _, _, err := parseAdoptID(id); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("parseAdoptID(%q): %v, want an error saying %q", id, err, msg)
		}
	}
}

func TestJudgeAdoption(t *testing.T) {
	a := func(uid, phase string) *apiv1.VirtualMachineAdoption {
		return &apiv1.VirtualMachineAdoption{Metadata: &apiv1.ObjectMeta{Uid: uid}, Status: &apiv1.VirtualMachineAdoptionStatus{Phase: phase}}
	}
	judge := judgeAdoption("u1")
	if v := judge(a("u1", apiv1.AdoptionAdopting)); v.done || v.err != nil {
		t.Errorf("Adopting: %+v", v)
	}
	if v := judge(a("u1", apiv1.AdoptionAdopted)); !v.done {
		t.Errorf("Adopted: %+v", v)
	}
	for _, p := range []string{apiv1.AdoptionRefused, apiv1.AdoptionFailed} {
		if v := judge(a("u1", p)); v.err == nil {
			t.Errorf("%s: %+v", p, v)
		}
	}
	if v := judge(a("u2", apiv1.AdoptionAdopted)); v.err == nil {
		t.Errorf("another adoption of the name: %+v", v)
	}
	msg := adoptionFailure(&apiv1.VirtualMachineAdoption{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec:     &apiv1.VirtualMachineAdoptionSpec{NodeName: "node-a", DomainName: "legacy"},
		Status: &apiv1.VirtualMachineAdoptionStatus{Phase: apiv1.AdoptionRefused,
			Refusals: []*apiv1.AdoptionRefusal{{Element: "devices.hostdev", Reason: "a host device passed through"}}},
	}, judge(a("u1", apiv1.AdoptionRefused)).err)
	if !strings.Contains(msg, "devices.hostdev: a host device passed through") {
		t.Errorf("failure message %q does not list the refusal", msg)
	}
}

// The adoption's annotation on an adopted VM's template is the server's:
// not shown, and kept by an apply.
func TestServerOwnedAnnotations(t *testing.T) {
	stored := map[string]string{apiv1.AnnotationAdoption: "u1", "team": "web"}
	if got := withoutServerOwned(stored); len(got) != 1 || got["team"] != "web" {
		t.Errorf("read: %v", got)
	}
	if got := withoutServerOwned(map[string]string{apiv1.AnnotationAdoption: "u1"}); got != nil {
		t.Errorf("read of the annotation alone: %v, want nil (null in the state)", got)
	}
	got := withServerOwned(map[string]string{"team": "db"}, stored)
	if len(got) != 2 || got["team"] != "db" || got[apiv1.AnnotationAdoption] != "u1" {
		t.Errorf("write: %v", got)
	}
	if got := withServerOwned(nil, stored); len(got) != 1 || got[apiv1.AnnotationAdoption] != "u1" {
		t.Errorf("write of no annotations: %v", got)
	}
	if got := withServerOwned(map[string]string{"a": "b"}, nil); len(got) != 1 {
		t.Errorf("write without server-owned ones: %v", got)
	}
}
