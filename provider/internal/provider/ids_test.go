package provider

import "testing"

func TestSelectorID(t *testing.T) {
	for in, want := range map[string]string{
		"":                    "*",
		"  ":                  "*",
		"zone=a":              "zone=a",
		"zone = a, gpu":       "gpu,zone=a",
		"tier in (web, db),x": "tier in (db,web),x",
	} {
		if got := selectorID(in); got != want {
			t.Errorf("selectorID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseVMID(t *testing.T) {
	for _, c := range []struct{ in, ns, name string }{
		{"prod/web", "prod", "web"},
		{"web", "default", "web"},
	} {
		ns, name, err := parseNamespacedID(c.in)
		if err != nil || ns != c.ns || name != c.name {
			t.Errorf("parseNamespacedID(%q) = %q, %q, %v", c.in, ns, name, err)
		}
	}
	for _, bad := range []string{"", "/", "a/", "/b", "a/b/c"} {
		if _, _, err := parseNamespacedID(bad); err == nil {
			t.Errorf("parseNamespacedID(%q) accepted", bad)
		}
	}
}
