package command

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
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
	a, b, c := vms[0].(*apiv1.VirtualMachine), vms[1].(*apiv1.VirtualMachine), vms[2].(*apiv1.VirtualMachine)
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
	for _, tc := range []struct{ file, kind, name string }{
		{"vm.yaml", "VirtualMachine", "demo"},
		{"invalid-vm.yaml", "VirtualMachine", "demo"},
		{"replicaset.yaml", apiv1.KindReplicaSet, "web"},
		{"pool.yaml", apiv1.KindPool, "db"},
	} {
		path := filepath.Join("..", "..", "examples", tc.file)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := parseManifests(path, data, "default", false)
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if len(objs) != 1 || kindOf(objs[0]) != tc.kind || objs[0].GetMetadata().GetName() != tc.name {
			t.Errorf("%s: got %v", tc.file, objs)
		}
	}
}

func TestParseManifestsReplicaKinds(t *testing.T) {
	data := `kind: VirtualMachineInstanceReplicaSet
metadata: {name: web}
spec:
  replicas: 0
  selector: {match_labels: {app: web}}
---
kind: VirtualMachinePool
metadata: {name: db, namespace: prod}
spec:
  maxUnavailable: 25%
  virtual_machine_template:
    spec: {run_strategy: Always}
`
	objs, err := parseManifests("r.yaml", []byte(data), "default", false)
	if err != nil {
		t.Fatal(err)
	}
	rs, ok := objs[0].(*apiv1.VirtualMachineInstanceReplicaSet)
	if !ok || rs.Metadata.Namespace != "default" || rs.Spec.Replicas == nil || *rs.Spec.Replicas != 0 || rs.Spec.Selector.MatchLabels["app"] != "web" {
		t.Errorf("replica set: %v", objs[0])
	}
	pool, ok := objs[1].(*apiv1.VirtualMachinePool)
	if !ok || pool.Metadata.Namespace != "prod" || pool.Spec.MaxUnavailable != "25%" || pool.Spec.VirtualMachineTemplate.Spec.RunStrategy != "Always" {
		t.Errorf("pool: %v", objs[1])
	}
	_, err = parseManifests("r.yaml", []byte("kind: VirtualMachinePool\nmetadata: {name: db}\nspec: {replica: 2}\n"), "default", false)
	if err == nil || !strings.Contains(err.Error(), `unknown field "replica" at spec.replica`) {
		t.Errorf("typo in a pool: %v", err)
	}
}
