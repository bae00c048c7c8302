package command

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// testCephKey is a key as ceph-authtool --gen-print-key prints one (made
// up: no cluster knows it).
const testCephKey = "AQCauhZroSmaLxAADcjclatTLvDt1b2rQ3bj4Q=="

// A key of the right length but not an AES key (type 2): the server
// refuses it without quoting it.
const badShapeCephKey = "AgCauhZroSmaLxAADcjclatTLvDt1b2rQ3bj4Q=="

// writeKey writes content to a file of mode perm in dir.
func writeKey(t *testing.T, dir, name, content string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil { // past the umask
		t.Fatal(err)
	}
	return p
}

// storageclass create rbd|shared-filesystem, get, apply -f and delete
// against the real API server: the key is read from a file or standard
// input and never printed by anything, bad input is refused naming the
// field, the immutable parts stay so, a class in use is not deleted, and
// get vm -o wide shows each persistent volume's class.
func TestScenarioStorageClasses(t *testing.T) {
	s := newScenario(t)
	ep := "unix://" + s.socket
	dir := t.TempDir()
	keyFile := writeKey(t, dir, "virtplane.key", testCephKey+"\n", 0o600)
	// cli runs the CLI and fails the test if its output shows the key.
	cli := func(stdin string, args ...string) (string, string, error) {
		t.Helper()
		out, errOut, err := runIn(t, ep, stdin, args...)
		for _, s := range []string{out, errOut, fmt.Sprint(err)} {
			if strings.Contains(s, testCephKey) || strings.Contains(s, badShapeCephKey) {
				t.Fatalf("%s shows the key: %s", strings.Join(args, " "), s)
			}
		}
		return out, errOut, err
	}
	mustCLI := func(stdin string, args ...string) string {
		t.Helper()
		out, _, err := cli(stdin, args...)
		if err != nil {
			t.Fatalf("%s: %v", strings.Join(args, " "), err)
		}
		return out
	}
	rbdArgs := func(name, key string, extra ...string) []string {
		return append([]string{"storageclass", "create", "rbd", name, "--monitor", "10.0.0.1:3300", "--monitor", "10.0.0.2:3300",
			"--pool", "vms", "--user", "virtplane", "--key-file", key}, extra...)
	}

	if out := mustCLI("", rbdArgs("ceph", keyFile, "--node-selector", "example.com/ceph=true")...); out != "storageclass/ceph created\n" {
		t.Fatalf("create rbd: %q", out)
	}
	// From standard input, as a keyring (ceph auth get client.NAME).
	keyring := "[client.virtplane]\n\tkey = " + testCephKey + "\n\tcaps mon = \"profile rbd\"\n"
	if out := mustCLI(keyring, rbdArgs("ceph-b", "-")...); out != "storageclass/ceph-b created\n" {
		t.Fatalf("create rbd from a keyring on stdin: %q", out)
	}
	if out := mustCLI("", "sc", "create", "shared-filesystem", "nfs", "--path", "/mnt/vms", "--node-selector", "example.com/nfs=true"); out != "storageclass/nfs created\n" {
		t.Fatalf("create shared-filesystem: %q", out)
	}
	got, err := s.c.StorageClasses.Connect(s.ctx, &apiv1.ConnectStorageClassRequest{Name: "ceph-b"})
	if err != nil || got.GetStorageClass().GetSpec().GetRbd().GetKey() != testCephKey {
		t.Fatalf("the server holds for ceph-b: %v, %v; want the keyring's key", got.GetStorageClass().GetSpec().GetRbd(), err)
	}

	// READY: Unknown until the server has judged a class; then False for
	// made-up monitors, True for a shared filesystem (its nodes check it).
	table := mustCLI("", "get", "storageclasses")
	for _, re := range []string{
		`(?m)^NAME\s+KIND\s+WHERE\s+NODE-SELECTOR\s+READY\s+KEY-SET\s+AGE$`,
		`(?m)^ceph\s+rbd\s+vms@10\.0\.0\.1:3300,10\.0\.0\.2:3300\s+example\.com/ceph=true\s+(Unknown|False)\s+True\s+\S+$`,
		`(?m)^ceph-b\s+rbd\s+vms@10\.0\.0\.1:3300,10\.0\.0\.2:3300\s+<none>\s+(Unknown|False)\s+True\s+\S+$`,
		`(?m)^nfs\s+shared_filesystem\s+/mnt/vms\s+example\.com/nfs=true\s+(Unknown|True)\s+<none>\s+\S+$`,
	} {
		if !regexp.MustCompile(re).MatchString(table) {
			t.Fatalf("get storageclasses lacks %s:\n%s", re, table)
		}
	}
	if y := mustCLI("", "get", "sc", "ceph", "-o", "yaml"); !strings.Contains(y, "key_set: true") || strings.Contains(y, "key:") {
		t.Fatalf("get sc ceph -o yaml:\n%s", y)
	}

	// Bad input: refused, naming the field, and nothing made.
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
		want  []string
	}{
		{"a monitor name", append(rbdArgs("bad", keyFile)[:3:3], "bad", "--monitor", "ceph-mon-1:3300", "--pool", "vms", "--user", "virtplane", "--key-file", keyFile),
			"", []string{`StorageClass "bad" is invalid`, "spec.rbd.monitors[0]", "IP literal"}},
		{"a key of the wrong shape", rbdArgs("bad", "-"), badShapeCephKey, []string{"spec.rbd.key", "(hidden)", "cephx key"}},
		{"the built-in name", rbdArgs("local", keyFile), "", []string{"metadata.name", "built-in"}},
		{"a relative path", []string{"storageclass", "create", "shared-filesystem", "bad", "--path", "mnt/vms"}, "",
			[]string{"spec.shared_filesystem.path", "absolute"}},
		{"a keyring of two keys", rbdArgs("bad", "-"), keyring + "[client.other]\n\tkey = " + testCephKey + "\n", []string{"keyring of 2 keys"}},
		{"an empty key file", rbdArgs("bad", writeKey(t, dir, "empty", "\n", 0o600)), "", []string{"holds no key"}},
		{"no key file", rbdArgs("bad", filepath.Join(dir, "missing")), "", []string{"no such file"}},
		{"two words", rbdArgs("bad", "-"), testCephKey + " " + testCephKey, []string{"neither a cephx key alone nor a keyring"}},
		{"no key flag", rbdArgs("bad", keyFile)[:len(rbdArgs("bad", keyFile))-2], "", []string{`required flag(s) "key-file" not set`}},
	} {
		_, _, err := cli(tc.stdin, tc.args...)
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v, want an error with %q", tc.name, err, w)
			}
		}
	}
	if _, err := s.c.StorageClasses.Get(s.ctx, &apiv1.GetStorageClassRequest{Name: "bad"}); err == nil {
		t.Error("a refused class exists")
	}
	// A key file others can read is used, with a warning.
	_, errOut, err := cli("", rbdArgs("ceph-c", writeKey(t, dir, "open.key", testCephKey, 0o644))...)
	if err != nil || !strings.Contains(errOut, "may be read by others than its owner (mode 0644)") {
		t.Fatalf("a world-readable key file: %q, %v", errOut, err)
	}

	// apply -f: the example creates its classes; an rbd class applied
	// without its key keeps the stored one; the pool cannot change.
	example := "../../examples/storageclass.yaml"
	mustCLI("", "delete", "storageclass", "ceph", "nfs")
	if out := mustCLI("", "apply", "-f", example); out != "storageclass/ceph created\nstorageclass/nfs created\n" {
		t.Fatalf("apply %s: %q", example, out)
	}
	if out := mustCLI("", "apply", "-f", example); out != "storageclass/ceph unchanged\nstorageclass/nfs unchanged\n" {
		t.Fatalf("apply %s again: %q", example, out)
	}
	manifest := func(pool, selector, key string) string {
		m := "kind: StorageClass\nmetadata:\n  name: ceph\nspec:\n  rbd:\n    monitors: [\"10.0.0.1:3300\"]\n    pool: " + pool +
			"\n    user: virtplane\n"
		if key != "" {
			m += "    key: " + key + "\n"
		}
		return m + "  node_selector:\n    example.com/ceph: \"" + selector + "\"\n"
	}
	if out := mustCLI(manifest("vms", "yes", ""), "apply", "-f", "-"); out != "storageclass/ceph configured\n" {
		t.Fatalf("apply a new node selector without the key: %q", out)
	}
	if out := mustCLI(manifest("vms", "yes", ""), "apply", "-f", "-"); out != "storageclass/ceph unchanged\n" {
		t.Fatalf("apply it again: %q", out)
	}
	cur, err := s.c.StorageClasses.Connect(s.ctx, &apiv1.ConnectStorageClassRequest{Name: "ceph"})
	if err != nil || cur.GetStorageClass().GetSpec().GetRbd().GetKey() != testCephKey ||
		cur.GetStorageClass().GetSpec().GetNodeSelector()["example.com/ceph"] != "yes" {
		t.Fatalf("after apply without the key: %v, %v", cur.GetStorageClass().GetSpec(), err)
	}
	for _, tc := range []struct {
		name, stdin string
		want        []string
	}{
		{"another pool", manifest("other", "yes", ""), []string{"spec.rbd.pool", "immutable"}},
		{"a bad key", manifest("vms", "yes", badShapeCephKey), []string{"spec.rbd.key", "(hidden)"}},
		{"a namespace", strings.Replace(manifest("vms", "yes", ""), "  name: ceph\n", "  name: ceph\n  namespace: prod\n", 1),
			[]string{"metadata.namespace: a StorageClass is cluster-scoped"}},
	} {
		_, _, err := cli(tc.stdin, "apply", "-f", "-")
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("apply %s: %v, want an error with %q", tc.name, err, w)
			}
		}
	}
	// -n is for namespaced kinds: a class applied with it has none.
	if out := mustCLI(manifest("vms", "yes", ""), "apply", "-f", "-", "-n", "prod"); out != "storageclass/ceph unchanged\n" {
		t.Fatalf("apply with -n: %q", out)
	}

	// A VM's persistent volumes and their classes; the class of one
	// cannot change, and a class in use is not deleted.
	vm := scenarioVM("db", "Halted", "", "")
	spec := vm.Spec.Template.Spec
	spec.Domain.Devices = &apiv1.Devices{Disks: []*apiv1.Disk{{Name: "data"}, {Name: "scratch"}}}
	spec.Volumes = []*apiv1.Volume{
		{Name: "data", Persistent: &apiv1.PersistentVolume{Size: "1Gi", StorageClass: "ceph"}},
		{Name: "scratch", Persistent: &apiv1.PersistentVolume{Size: "64Mi"}},
	}
	s.create(vm)
	if out := mustCLI("", "get", "vm", "db", "-o", "wide"); !regexp.MustCompile(`(?m)^NAME\s+AGE\s+STATUS\s+READY\s+STORAGE\n` +
		`db\s.*\sdata=ceph,scratch=local$`).MatchString(out) {
		t.Fatalf("get vm -o wide:\n%s", out)
	}
	vmYAML := mustCLI("", "get", "vm", "db", "-o", "yaml")
	moved := strings.Replace(vmYAML, "storage_class: ceph", "storage_class: nfs", 1)
	if moved == vmYAML {
		t.Fatalf("get vm -o yaml shows no storage class:\n%s", vmYAML)
	}
	if _, _, err := cli(moved, "apply", "-f", "-"); err == nil ||
		!strings.Contains(err.Error(), "spec.template.spec.volumes[0].persistent.storage_class") ||
		!strings.Contains(err.Error(), "may not change from ceph to nfs") {
		t.Fatalf("apply moving a volume to another class: %v", err)
	}
	if _, _, err := cli("", "delete", "sc", "ceph"); err == nil || !strings.Contains(err.Error(), "in use by vm default/db") {
		t.Fatalf("delete a class in use: %v", err)
	}
	mustCLI("", "delete", "vm", "db", "--wait")
	if out := mustCLI("", "delete", "sc", "ceph", "--wait"); out != "storageclass \"ceph\" deleted\n" {
		t.Fatalf("delete sc: %q", out)
	}
	if _, _, err := cli("", "get", "sc", "ceph"); err == nil || !strings.Contains(err.Error(), `storageclass "ceph" not found`) {
		t.Fatalf("get a deleted class: %v", err)
	}
}
