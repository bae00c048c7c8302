package apiv1

import (
	"strings"
	"testing"
)

func TestPoolOrdinalRoundTrip(t *testing.T) {
	for _, pool := range []string{"web", "web-1", "a", strings.Repeat("p", MaxPoolNameLen)} {
		for _, n := range []int{0, 1, 9, 10, 42, 4999, 99999} {
			name := PoolVMName(pool, n)
			got, ok := PoolOrdinal(pool, name)
			if !ok || got != n {
				t.Errorf("PoolOrdinal(%q, %q) = %d, %v; want %d", pool, name, got, ok, n)
			}
			if len(pool) == MaxPoolNameLen && n <= 99999 && len(name) > 63 {
				t.Errorf("%q is longer than a DNS label", name)
			}
		}
	}
}

func TestPoolOrdinalIsStrict(t *testing.T) {
	for _, tc := range []struct{ pool, name string }{
		{"web", "web"},
		{"web", "web-"},
		{"web", "web-01"},
		{"web", "web-00"},
		{"web", "web-+1"},
		{"web", "web--1"},
		{"web", "web-1a"},
		{"web", "web-1-0"}, // pool web-1's VM 0
		{"web", "webs-1"},
		{"web", "db-1"},
		{"web", "web- 1"},
		{"web", "web-1234567890"},
		{"web", "web-١"}, // an Arabic-Indic digit
	} {
		if n, ok := PoolOrdinal(tc.pool, tc.name); ok {
			t.Errorf("PoolOrdinal(%q, %q) = %d, true; want false", tc.pool, tc.name, n)
		}
	}
}

func TestReplicaSetInstanceName(t *testing.T) {
	rs := strings.Repeat("r", MaxReplicaSetNameLen)
	name := ReplicaSetInstanceName(rs)
	suffix, ok := strings.CutPrefix(name, rs+"-")
	if !ok || len(suffix) != ReplicaSetSuffixLen || len(name) != 63 {
		t.Fatalf("ReplicaSetInstanceName(%d chars) = %q", len(rs), name)
	}
	for _, c := range suffix {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			t.Fatalf("suffix %q is not lowercase letters and digits", suffix)
		}
	}
	// 32^5 names: two in a row are the same once in 33 million.
	if a, b := ReplicaSetInstanceName("web"), ReplicaSetInstanceName("web"); a == b {
		t.Errorf("two names in a row are the same: %s", a)
	}
}

func TestMaxUnavailable(t *testing.T) {
	for _, tc := range []struct {
		s        string
		replicas int32
		want     int
	}{
		{"", 10, 10}, {"100%", 7, 7}, {"1", 10, 1}, {"3", 2, 3},
		{"25%", 10, 3}, {"1%", 1, 1}, {"50%", 5, 3}, {"10%", 0, 0},
	} {
		if got, err := MaxUnavailableCount(tc.s, tc.replicas); err != nil || got != tc.want {
			t.Errorf("MaxUnavailableCount(%q, %d) = %d, %v; want %d", tc.s, tc.replicas, got, err, tc.want)
		}
	}
	for _, s := range []string{"0", "0%", "101%", "-1", "+1", "01", "1.5", "abc", "%", "1 ", "9999999999", "50%%"} {
		if _, _, err := ParseMaxUnavailable(s); err == nil {
			t.Errorf("ParseMaxUnavailable(%q) accepted", s)
		}
	}
}

func TestSelector(t *testing.T) {
	sel := &LabelSelector{MatchLabels: map[string]string{"tier": "front", "app": "web"}}
	if got := SelectorString(sel); got != "app=web,tier=front" {
		t.Errorf("SelectorString = %q", got)
	}
	if !sel.Matches(map[string]string{"app": "web", "tier": "front", "x": "y"}) {
		t.Error("a superset of the labels does not match")
	}
	if sel.Matches(map[string]string{"app": "web"}) || sel.Matches(map[string]string{"app": "web", "tier": "back"}) {
		t.Error("a missing or different label matches")
	}
	if (&LabelSelector{}).Matches(map[string]string{"app": "web"}) || (*LabelSelector)(nil).Matches(nil) {
		t.Error("an empty selector matches")
	}
	var rs *VirtualMachineInstanceReplicaSetSpec
	if rs.DesiredReplicas() != 1 || (&VirtualMachinePoolSpec{Replicas: new(int32)}).DesiredReplicas() != 0 {
		t.Error("DesiredReplicas: unset is 1, a set 0 is 0")
	}
}

func TestPoolRevisionNamesTheTemplate(t *testing.T) {
	tmpl := func(mem string, labels map[string]string) *VirtualMachineTemplateSpec {
		return &VirtualMachineTemplateSpec{
			Metadata: &ObjectMeta{Labels: labels},
			Spec: &VirtualMachineSpec{RunStrategy: RunStrategyAlways, Template: &VirtualMachineInstanceTemplateSpec{
				Spec: &VirtualMachineInstanceSpec{Domain: &DomainSpec{Memory: &Memory{Guest: mem}}},
			}},
		}
	}
	labels := map[string]string{"app": "web", "tier": "front", "zone": "a", "x": "1", "y": "2"}
	a := PoolRevision(tmpl("128Mi", labels))
	if len(a) != PoolRevisionLen || strings.Trim(a, "0123456789abcdef") != "" {
		t.Fatalf("PoolRevision = %q, want %d lowercase hex digits", a, PoolRevisionLen)
	}
	// Map order must not matter: a fresh map of the same pairs, many times.
	for range 20 {
		same := map[string]string{}
		for k, v := range labels {
			same[k] = v
		}
		if got := PoolRevision(tmpl("128Mi", same)); got != a {
			t.Fatalf("same template, revision %q then %q", a, got)
		}
	}
	if PoolRevision(tmpl("256Mi", labels)) == a {
		t.Error("a changed spec kept its revision")
	}
	if PoolRevision(tmpl("128Mi", map[string]string{"app": "web"})) == a {
		t.Error("changed template labels kept the revision")
	}
	if PoolRevision(nil) != PoolRevision(&VirtualMachineTemplateSpec{}) {
		t.Error("nil and empty templates differ")
	}
}
