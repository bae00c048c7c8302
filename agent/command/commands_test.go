package command

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

func TestApplyAndGet(t *testing.T) {
	fake, ep := startFake(t)

	if out := mustRun(t, ep, "apply", "-f", example); out != "virtualmachine/demo created\n" {
		t.Errorf("first apply printed %q", out)
	}
	var before, after int
	fake.locked(func() { before = fake.writes })
	if out := mustRun(t, ep, "apply", "-f", example); out != "virtualmachine/demo unchanged\n" {
		t.Errorf("second apply printed %q", out)
	}
	fake.locked(func() { after = fake.writes })
	if after != before {
		t.Errorf("unchanged apply wrote %d times", after-before)
	}

	data, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(data), "app: demo", "app: demo2", 1)
	fake.locked(func() { fake.conflicts = 2 }) // the update must survive concurrent writers
	if out, _, err := runIn(t, ep, changed, "apply", "-f", "-"); err != nil || out != "virtualmachine/demo configured\n" {
		t.Errorf("changed apply: %q, %v", out, err)
	}

	want := "" +
		"NAME   AGE   STATUS    READY\n" +
		"demo   3h    Stopped   False\n"
	if out := mustRun(t, ep, "get", "vms"); out != want {
		t.Errorf("get vms:\n%s\nwant:\n%s", out, want)
	}
	if out := mustRun(t, ep, "get", "virtualmachine", "demo"); out != want {
		t.Errorf("get virtualmachine demo:\n%s\nwant:\n%s", out, want)
	}
	if out := mustRun(t, ep, "get", "vm", "-A"); !strings.HasPrefix(out, "NAMESPACE   NAME   AGE") || !strings.Contains(out, "default     demo   3h") {
		t.Errorf("get vm -A:\n%s", out)
	}
	out := mustRun(t, ep, "get", "vm", "demo", "-o", "yaml")
	for _, w := range []string{"kind: VirtualMachine\n", "  labels:\n    app: demo2\n", "run_strategy: Always", "user_data: |"} {
		if !strings.Contains(out, w) {
			t.Errorf("get -o yaml lacks %q:\n%s", w, out)
		}
	}
	if out := mustRun(t, ep, "get", "vms", "-o", "json"); !strings.HasPrefix(out, "{\n    \"kind\": \"List\",\n    \"items\": [\n        {\n            \"kind\": \"VirtualMachine\",") {
		t.Errorf("get vms -o json:\n%s", out)
	}

	// get -o yaml output can be applied again.
	if out, _, err := runIn(t, ep, out, "apply", "-f", "-"); err != nil || out != "virtualmachine/demo unchanged\n" {
		t.Errorf("re-applying get -o yaml: %q, %v", out, err)
	}

	out, errOut, err := run(t, ep, "get", "vmis")
	if err != nil || out != "" || errOut != "No resources found in default namespace.\n" {
		t.Errorf("get vmis: %q, %q, %v", out, errOut, err)
	}
	if out := mustRun(t, ep, "get", "vmi", "-o", "yaml"); out != "items: []\nkind: List\n" {
		t.Errorf("get vmi -o yaml: %q", out)
	}
	wantNodes := "" +
		"NAME     STATUS   AGE   CPU   MEMORY   KVM   IMAGES   VERSION\n" +
		"node-a   Ready    3h    4     7Gi      kvm   0        dev\n"
	if out := mustRun(t, ep, "get", "nodes"); out != wantNodes {
		t.Errorf("get nodes:\n%s\nwant:\n%s", out, wantNodes)
	}
	wantWide := "" +
		"NAME     STATUS   AGE   CPU   MEMORY   KVM   IMAGES   VERSION   BRIDGES        NETWORKS\n" +
		"node-a   Ready    3h    4     7Gi      kvm   0        dev       br0,vpguest0   default\n"
	if out := mustRun(t, ep, "get", "nodes", "-o", "wide"); out != wantWide {
		t.Errorf("get nodes -o wide:\n%s\nwant:\n%s", out, wantWide)
	}
}

func TestApplyErrors(t *testing.T) {
	_, ep := startFake(t)

	_, _, err := run(t, ep, "apply", "-f", "../../examples/invalid-vm.yaml")
	want := `VirtualMachine "demo" is invalid:
  - spec.run_strategy: Unsupported value: "always": supported values: "Always", "Halted"
  - spec.template.spec.domain.memory.guest: Invalid value: "1GB": must be a quantity such as 512Mi`
	if err == nil || err.Error() != want {
		t.Errorf("apply invalid-vm.yaml: %v\nwant:\n%s", err, want)
	}

	// With several documents the others are still applied.
	two := "kind: VirtualMachine\nmetadata: {name: good}\nspec: {run_strategy: Always}\n---\n" +
		"kind: VirtualMachine\nmetadata: {name: bad}\nspec: {run_strategy: always}\n"
	out, errOut, err := runIn(t, ep, two, "apply", "-f", "-")
	if out != "virtualmachine/good created\n" ||
		!strings.HasPrefix(errOut, "error: VirtualMachine \"bad\" is invalid:\n  - spec.run_strategy:") ||
		err == nil || err.Error() != "1 of 2 objects could not be applied" {
		t.Errorf("partial apply: out %q, stderr %q, err %v", out, errOut, err)
	}
}

func TestCommandErrors(t *testing.T) {
	_, ep := startFake(t)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"get", "vm", "missing"}, `virtualmachine "missing" not found`},
		{[]string{"delete", "vm", "missing"}, `virtualmachine "missing" not found`},
		{[]string{"get", "vmi", "x"}, "not implemented by this agent yet: "},
		{[]string{"start", "running"}, "VM is already running"},
		{[]string{"unpause", "x"}, "not implemented by this agent yet: unpause needs the VM controller"},
		{[]string{"delete", "vmi", "x"}, "deleted through their VirtualMachine"},
		{[]string{"get", "vm", "x", "-A"}, "across all namespaces"},
		{[]string{"get", "vm", "-o", "xml"}, `unsupported output format "xml" (want table, wide, json or yaml)`},
		{[]string{"get", "images", "-o", "wide"}, "images have no wide output"},
		{[]string{"get", "pods"}, `unknown resource type "pods"`},
		{[]string{"stop", "x", "--force", "--grace-period", "3"}, "cannot be combined"},
	}
	for _, tt := range tests {
		_, _, err := run(t, ep, tt.args...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}

	_, _, err := run(t, "unix:///nonexistent/agent.sock", "get", "vms")
	if err == nil || !strings.HasPrefix(err.Error(), "cannot reach the agent: ") || !strings.Contains(err.Error(), "/nonexistent/agent.sock") {
		t.Errorf("unreachable agent: %v", err)
	}
}

func TestLifecycleCommands(t *testing.T) {
	fake, ep := startFake(t)

	if out := mustRun(t, ep, "start", "demo", "--paused", "-n", "prod"); out != "virtualmachine \"demo\" start requested\n" {
		t.Errorf("start printed %q", out)
	}
	start, _, _ := fake.lastRequests()
	if k := start.GetKey(); k.GetNamespace() != "prod" || k.GetName() != "demo" || !start.GetPaused() {
		t.Errorf("start request %v", start)
	}

	for _, tt := range []struct {
		args []string
		want *int64
	}{
		{[]string{"stop", "demo"}, nil},
		{[]string{"stop", "demo", "--grace-period", "5"}, proto.Int64(5)},
		{[]string{"stop", "demo", "--force"}, proto.Int64(0)},
	} {
		if out := mustRun(t, ep, tt.args...); out != "virtualmachine \"demo\" stop requested\n" {
			t.Errorf("%v printed %q", tt.args, out)
		}
		_, stop, _ := fake.lastRequests()
		got := stop.GracePeriodSeconds
		if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
			t.Errorf("%v: grace period %v, want %v", tt.args, got, tt.want)
		}
	}

	mustRun(t, ep, "restart", "demo")
	if _, _, restart := fake.lastRequests(); restart.GracePeriodSeconds != nil {
		t.Errorf("restart without --force sent grace period %d", *restart.GracePeriodSeconds)
	}
	if out := mustRun(t, ep, "restart", "demo", "--force"); out != "virtualmachine \"demo\" restart requested\n" {
		t.Errorf("restart printed %q", out)
	}
	if _, _, restart := fake.lastRequests(); restart.GracePeriodSeconds == nil || *restart.GracePeriodSeconds != 0 {
		t.Errorf("restart --force sent grace period %v", restart.GracePeriodSeconds)
	}
}

func TestDeleteWait(t *testing.T) {
	fake, ep := startFake(t)
	mustRun(t, ep, "apply", "-f", example)

	// Plain delete of an object that goes at once.
	if out := mustRun(t, ep, "delete", "vm", "demo", "--wait"); out != "virtualmachine \"demo\" deleted\n" {
		t.Errorf("delete printed %q", out)
	}

	// A deletion that takes a while: --wait returns only when it is done.
	mustRun(t, ep, "apply", "-f", example)
	fake.locked(func() { fake.holdDeletes = true })
	done := make(chan error, 1)
	var out, errOut testutil.SyncBuffer
	go func() { done <- runCmd(context.Background(), ep, "", &out, &errOut, "delete", "vm", "demo", "--wait") }()
	testutil.Eventually(t, 10*time.Second, "delete --wait to report the deletion requested", func() bool { return out.String() != "" })
	testutil.Consistently(t, 200*time.Millisecond, "delete --wait waiting while the VM is there", func() bool { return len(done) == 0 })
	fake.finishDelete("default", "demo")
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("delete --wait did not return after the VM was gone")
	}

	// And gives up after --timeout.
	mustRun(t, ep, "apply", "-f", example)
	_, _, err := run(t, ep, "delete", "vm", "demo", "--wait", "--timeout", "300ms")
	if err == nil || !strings.Contains(err.Error(), `timed out after 300ms waiting for virtualmachine "demo" to be deleted`) {
		t.Errorf("delete --wait --timeout: %v", err)
	}
}

func TestGetWatch(t *testing.T) {
	fake, ep := startFake(t)
	mustRun(t, ep, "apply", "-f", example)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut testutil.SyncBuffer
	done := make(chan error, 1)
	go func() { done <- runCmd(ctx, ep, "", &out, &errOut, "get", "vm", "-w") }()

	row := func(status string) string {
		return fmt.Sprintf("demo                   3h      %-12s   False\n", status)
	}
	header := "NAME                   AGE     STATUS         READY\n"
	testutil.Eventually(t, 10*time.Second, "the Stopped row", func() bool { return out.String() == header+row("Stopped") })
	fake.setStatus("default", "demo", "Starting")
	testutil.Eventually(t, 10*time.Second, "the Starting row", func() bool { return out.String() == header+row("Stopped")+row("Starting") })
	fake.finishDelete("default", "demo")
	testutil.Eventually(t, 10*time.Second, "four lines", func() bool { return strings.Count(out.String(), "\n") == 4 })

	cancel() // Ctrl-C ends the watch without an error
	if err := <-done; err != nil {
		t.Errorf("get -w: %v", err)
	}
	if got, want := out.String(), header+row("Stopped")+row("Starting")+row("Starting"); got != want {
		t.Errorf("get -w printed:\n%s\nwant:\n%s", got, want)
	}
}
