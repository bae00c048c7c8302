package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseManifestsMultiDoc(t *testing.T) {
	data := `# two machines
---
apiVersion: virtplane.io/v1
kind: VirtualMachine
metadata:
  name: a
  labels: {app: a}
spec:
  run_strategy: Always
  template:
    spec:
      domain:
        cpu: {cores: 2}
        memory: {guest: 256Mi}
--- # comments after the marker are fine
# only a comment: skipped
---
kind: VirtualMachine
metadata: {name: b, namespace: other}
spec:
  runStrategy: Halted
---
{"kind": "VirtualMachine", "metadata": {"name": "c"}}
`
	vms, err := parseManifests("vms.yaml", []byte(data), "default", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(vms) != 3 {
		t.Fatalf("got %d VMs, want 3", len(vms))
	}
	a, b, c := vms[0], vms[1], vms[2]
	if a.GetMetadata().GetName() != "a" || a.GetMetadata().GetNamespace() != "default" ||
		a.GetMetadata().GetLabels()["app"] != "a" || a.GetSpec().GetRunStrategy() != "Always" ||
		a.GetSpec().GetTemplate().GetSpec().GetDomain().GetCpu().GetCores() != 2 ||
		a.GetSpec().GetTemplate().GetSpec().GetDomain().GetMemory().GetGuest() != "256Mi" {
		t.Errorf("a = %v", a)
	}
	// The document's own namespace wins over the default -n; JSON field
	// names (runStrategy) are accepted like protojson does.
	if b.GetMetadata().GetNamespace() != "other" || b.GetSpec().GetRunStrategy() != "Halted" {
		t.Errorf("b = %v", b)
	}
	if c.GetMetadata().GetName() != "c" || c.GetMetadata().GetNamespace() != "default" {
		t.Errorf("c = %v", c)
	}
}

func TestParseManifestsCRLF(t *testing.T) {
	data := "kind: VirtualMachine\r\nmetadata: {name: a}\r\n---\r\nkind: VirtualMachine\r\nmetadata: {name: b}\r\n"
	vms, err := parseManifests("crlf.yaml", []byte(data), "default", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(vms) != 2 {
		t.Fatalf("got %d VMs, want 2", len(vms))
	}
}

func TestParseManifestsErrors(t *testing.T) {
	const vmA = "kind: VirtualMachine\nmetadata: {name: a}\n"
	tests := []struct {
		name     string
		data     string
		explicit bool
		want     []string
	}{
		{"bad kind", vmA + "---\nkind: Node\nmetadata: {name: n1}\n",
			false, []string{"bad.yaml", "document 2", `kind "Node" cannot be applied`, "only VirtualMachine"}},
		{"missing kind", "metadata: {name: a}\n",
			false, []string{"document 1", "kind is missing"}},
		{"bad apiVersion", "apiVersion: kubevirt.io/v1\nkind: VirtualMachine\nmetadata: {name: a}\n",
			false, []string{"document 1", `apiVersion "kubevirt.io/v1" is not supported`}},
		{"typo field", vmA + "---\n" + `kind: VirtualMachine
metadata: {name: b}
spec:
  template:
    spec:
      domain:
        memroy: {guest: 1Gi}
`, false, []string{"bad.yaml", `document 2 (VirtualMachine "b")`, `unknown field "memroy"`, "at spec.template.spec.domain.memroy"}},
		{"typo in a list element", `kind: VirtualMachine
metadata: {name: a}
spec:
  template:
    spec:
      volumes:
      - name: root
        image: {name: x.qcow2}
      - name: data
        persistant: {size: 1Gi}
`, false, []string{`unknown field "persistant"`, "at spec.template.spec.volumes[1].persistant"}},
		{"typo at top level", vmA + "specs: {}\n", false, []string{`unknown field "specs"`, "at specs"}},
		{"wrong type", vmA + "spec:\n  template:\n    spec:\n      domain:\n        cpu: {cores: two}\n",
			false, []string{"document 1", "cores"}},
		{"missing name", "kind: VirtualMachine\nmetadata: {namespace: x}\n",
			false, []string{"metadata.name is required"}},
		{"namespace mismatch with -n", "kind: VirtualMachine\nmetadata: {name: a, namespace: prod}\n",
			true, []string{`namespace of the object ("prod") does not match --namespace "default"`}},
		{"not an object", "- a\n- b\n", false, []string{"document 1", "got a list"}},
		{"yaml syntax", vmA + "---\nkind: VirtualMachine\nmetadata: {name: [\n", false, []string{"bad.yaml", "line 4"}},
		{"duplicate key", "kind: VirtualMachine\nkind: VirtualMachine\nmetadata: {name: a}\n", false, []string{"bad.yaml", "kind"}},
		{"empty", "# nothing\n---\n", false, []string{"bad.yaml: no objects found"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseManifests("bad.yaml", []byte(tt.data), "default", tt.explicit)
			if err == nil {
				t.Fatal("parseManifests succeeded, want error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "(line 1:") {
				t.Errorf("error %q leaks protojson's position in the converted JSON", err)
			}
		})
	}
}

// The examples are documentation; they must stay parseable.
func TestExamples(t *testing.T) {
	for _, f := range []string{"vm.yaml", "invalid-vm.yaml"} {
		path := filepath.Join("..", "..", "examples", f)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		vms, err := parseManifests(path, data, "default", false)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if len(vms) != 1 || vms[0].GetMetadata().GetName() != "demo" {
			t.Errorf("%s: got %v", f, vms)
		}
	}
}
