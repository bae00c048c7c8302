package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// testCephKey is a key as ceph-authtool --gen-print-key prints one (made
// up); badShapeKey has its length but not an AES key's type.
const (
	testCephKey = "AQCauhZroSmaLxAADcjclatTLvDt1b2rQ3bj4Q=="
	badShapeKey = "AgCauhZroSmaLxAADcjclatTLvDt1b2rQ3bj4Q=="
)

func TestStorageClassValidators(t *testing.T) {
	for _, c := range []struct {
		v    validator.String
		in   string
		want bool
		says string
	}{
		{storageClassNameValidator(), "ceph", true, ""},
		{storageClassNameValidator(), "local", false, "built-in"},
		{storageClassNameValidator(), "Ceph", false, "lower case"},
		{storageClassNameValidator(), "ceph.fast", false, ""}, // a label, not a subdomain
		{storageClassFieldValidator("spec.rbd.pool"), "vms", true, ""},
		{storageClassFieldValidator("spec.rbd.pool"), "vms/ns", false, "letters, digits"},
		{storageClassFieldValidator("spec.rbd.user"), "virtplane", true, ""},
		{storageClassFieldValidator("spec.rbd.user"), "client.virtplane", false, `without "client."`},
		{storageClassFieldValidator("spec.rbd.key"), testCephKey, true, ""},
		{storageClassFieldValidator("spec.rbd.key"), testCephKey + "\n", true, ""}, // file() keeps the newline
		{storageClassFieldValidator("spec.rbd.key"), badShapeKey, false, "cephx key"},
		{storageClassFieldValidator("spec.rbd.key"), "not-a-key-xyz", false, `"(hidden)"`},
		{storageClassFieldValidator("spec.shared_filesystem.path"), "/mnt/vms", true, ""},
		{storageClassFieldValidator("spec.shared_filesystem.path"), "/mnt/../vms", false, "clean"},
		{storageClassFieldValidator("spec.shared_filesystem.path"), "/", false, "absolute"},
		{storageClassFieldValidator("spec.shared_filesystem.path"), "mnt", false, "absolute"},
	} {
		ok, msg := validString(c.v, c.in)
		if ok != c.want || !strings.Contains(msg, c.says) {
			t.Errorf("%q (%s) = %v %q, want %v saying %q", c.in, c.v.Description(context.Background()), ok, msg, c.want, c.says)
		}
		if strings.Contains(msg, badShapeKey) || strings.Contains(msg, "not-a-key-xyz") {
			t.Errorf("%q: the message repeats the key: %s", c.in, msg)
		}
	}
}

// Each monitor is checked where it is in the list; unknown ones later.
func TestStorageClassMonitorsValidator(t *testing.T) {
	list := func(elems ...attr.Value) types.List {
		l, d := types.ListValue(types.StringType, elems)
		if d.HasError() {
			t.Fatal(d)
		}
		return l
	}
	s := types.StringValue
	var resp validator.ListResponse
	storageClassMonitorsValidator().ValidateList(context.Background(), validator.ListRequest{
		Path: path.Root("rbd").AtName("monitors"),
		ConfigValue: list(s("10.0.0.1:3300"), types.StringUnknown(), s("ceph-mon:3300"), s("10.0.0.1:3300"),
			s("[fd00::1]:3300"), s("10.0.0.01:3300")),
	}, &resp)
	got := map[string]string{}
	for _, e := range resp.Diagnostics.Errors() {
		got[e.(interface{ Path() path.Path }).Path().String()] = e.Detail()
	}
	want := map[string]string{
		"rbd.monitors[2]": "IP literal",
		"rbd.monitors[3]": "Duplicate",
		"rbd.monitors[5]": "IP literal",
	}
	if len(got) != len(want) {
		t.Errorf("errors on %v, want on %v", got, want)
	}
	for p, frag := range want {
		if !strings.Contains(got[p], frag) {
			t.Errorf("%s: %q, want it to say %q", p, got[p], frag)
		}
	}
}

// The agent's errors about a class land on the attributes that set the
// fields.
func TestStorageClassAttributePath(t *testing.T) {
	for field, want := range map[string]string{
		"metadata.name":                "name",
		"spec.node_selector[a/b]":      `node_selector["a/b"]`,
		"spec.rbd.monitors":            "rbd.monitors",
		"spec.rbd.monitors[2]":         "rbd.monitors[2]",
		"spec.rbd.pool":                "rbd.pool",
		"spec.rbd.key":                 "rbd.key",
		"spec.rbd":                     "rbd",
		"spec.shared_filesystem.path":  "shared_filesystem.path",
		"spec.shared_filesystem":       "shared_filesystem",
		"spec":                         "",
		"status.conditions[0].message": "",
	} {
		p, ok := storageClassAttributePath(field)
		if got := p.String(); (want == "") == ok || (ok && got != want) {
			t.Errorf("%s: %s %v, want %q", field, got, ok, want)
		}
	}
}

func TestStorageClassSchemasDocumentEveryAttribute(t *testing.T) {
	rs := documentedResource(t, NewStorageClassResource())
	ds := documentedDataSource(t, NewStorageClassDataSource())
	mirrorsResource(t, rs, ds)
}
