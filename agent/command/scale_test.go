package command

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/apiserver"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
	"github.com/virtplane/terraform-provider-virtplane/internal/store/memstore"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// startAPI serves the real API (validation, defaults, scale) over
// in-memory stores, whose objects are three hours old, and returns the
// stores, for a test to write what a controller would, and the endpoint.
func startAPI(t *testing.T) (apiserver.Stores, string) {
	t.Helper()
	db := memstore.NewDB(func() time.Time { return time.Now().Add(-3 * time.Hour) })
	st := apiserver.Stores{
		VMs:         memstore.New(db, store.VirtualMachines),
		VMIs:        memstore.New(db, store.VirtualMachineInstances),
		Nodes:       memstore.New(db, store.Nodes),
		Migrations:  memstore.New(db, store.Migrations),
		Images:      memstore.New(db, store.Images),
		ReplicaSets: memstore.New(db, store.ReplicaSets),
		Pools:       memstore.New(db, store.Pools),
	}
	srv := apiserver.New(st, apiserver.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	return st, serveUnix(t, func(g *grpc.Server) { srv.Register(g) })
}

func TestReplicaKindsApplyGetScaleDelete(t *testing.T) {
	st, ep := startAPI(t)
	ctx := context.Background()

	if out := mustRun(t, ep, "apply", "-f", "../../examples/replicaset.yaml"); out != "virtualmachineinstancereplicaset/web created\n" {
		t.Errorf("apply replicaset.yaml printed %q", out)
	}
	if out := mustRun(t, ep, "apply", "-f", "../../examples/replicaset.yaml"); out != "virtualmachineinstancereplicaset/web unchanged\n" {
		t.Errorf("second apply printed %q", out)
	}
	if out := mustRun(t, ep, "apply", "-f", "../../examples/pool.yaml"); out != "virtualmachinepool/db created\n" {
		t.Errorf("apply pool.yaml printed %q", out)
	}

	// What the controllers would report.
	if _, err := st.ReplicaSets.GuaranteedUpdate(ctx, "default", "web", func(rs *apiv1.VirtualMachineInstanceReplicaSet) (*apiv1.VirtualMachineInstanceReplicaSet, error) {
		rs.Status.Replicas, rs.Status.ReadyReplicas = 3, 2
		return rs, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Pools.GuaranteedUpdate(ctx, "default", "db", func(p *apiv1.VirtualMachinePool) (*apiv1.VirtualMachinePool, error) {
		p.Status.Replicas, p.Status.ReadyReplicas, p.Status.UpdatedReplicas = 2, 1, 2
		return p, nil
	}); err != nil {
		t.Fatal(err)
	}

	wantRS := "" +
		"NAME   DESIRED   CURRENT   READY   AGE\n" +
		"web    3         3         2       3h\n"
	for _, name := range []string{"rs", "replicaset", "replicasets", "vmirs"} {
		if out := mustRun(t, ep, "get", name); out != wantRS {
			t.Errorf("get %s:\n%s\nwant:\n%s", name, out, wantRS)
		}
	}
	wantPool := "" +
		"NAME   DESIRED   CURRENT   READY   UPDATED   AGE\n" +
		"db     2         2         1       2         3h\n"
	for _, args := range [][]string{{"get", "pool"}, {"get", "pools"}, {"get", "vmpool", "db"}} {
		if out := mustRun(t, ep, args...); out != wantPool {
			t.Errorf("%s:\n%s\nwant:\n%s", strings.Join(args, " "), out, wantPool)
		}
	}
	if out := mustRun(t, ep, "get", "pool", "-A"); !strings.HasPrefix(out, "NAMESPACE   NAME   DESIRED") || !strings.Contains(out, "default     db     2") {
		t.Errorf("get pool -A:\n%s", out)
	}
	out := mustRun(t, ep, "get", "pool", "db", "-o", "yaml")
	for _, w := range []string{"kind: VirtualMachinePool\n", `max_unavailable: "1"`, "scale_in_order: DescendingOrder", "label_selector: app=db", "size: 1Gi"} {
		if !strings.Contains(out, w) {
			t.Errorf("get pool -o yaml lacks %q:\n%s", w, out)
		}
	}
	// What get prints applies again, unchanged.
	if got, _, err := runIn(t, ep, out, "apply", "-f", "-"); err != nil || got != "virtualmachinepool/db unchanged\n" {
		t.Errorf("re-applying get -o yaml: %q, %v", got, err)
	}
	if out := mustRun(t, ep, "get", "rs", "-o", "json"); !strings.Contains(out, `"kind": "VirtualMachineInstanceReplicaSet"`) {
		t.Errorf("get rs -o json:\n%s", out)
	}

	// A changed template is configured; the selector cannot change.
	pool := strings.Replace(readFile(t, "../../examples/pool.yaml"), "guest: 512Mi", "guest: 1Gi", 1)
	if got, _, err := runIn(t, ep, pool, "apply", "-f", "-"); err != nil || got != "virtualmachinepool/db configured\n" {
		t.Errorf("changed apply: %q, %v", got, err)
	}
	moved := strings.Replace(pool, "app: db", "app: db2", -1)
	_, _, err := runIn(t, ep, moved, "apply", "-f", "-")
	if err == nil || !strings.Contains(err.Error(), "VirtualMachinePool \"db\" is invalid:\n  - spec.selector: Invalid value: \"app=db2\": selector is immutable after creation") {
		t.Errorf("apply with a new selector: %v", err)
	}

	if out := mustRun(t, ep, "scale", "pool", "db", "--replicas", "5"); out != "virtualmachinepool \"default/db\" scaled to 5\n" {
		t.Errorf("scale pool printed %q", out)
	}
	if out := mustRun(t, ep, "scale", "rs", "web", "--replicas", "0"); out != "virtualmachineinstancereplicaset \"default/web\" scaled to 0\n" {
		t.Errorf("scale rs printed %q", out)
	}
	if out := mustRun(t, ep, "get", "pool"); !strings.Contains(out, "db     5         2") {
		t.Errorf("get pool after scale:\n%s", out)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"scale", "rs", "web", "--replicas", "6000"}, "VirtualMachineInstanceReplicaSet \"web\" is invalid:\n  - replicas: Invalid value: 6000: must be between 0 and 5000"},
		{[]string{"scale", "pool", "missing", "--replicas", "1"}, `virtualmachinepool "missing" not found`},
		{[]string{"scale", "vm", "demo", "--replicas", "1"}, "virtualmachine cannot be scaled: only replica sets (rs) and pools (pool) can"},
		{[]string{"scale", "rs", "web"}, `required flag(s) "replicas" not set`},
		{[]string{"get", "rs", "missing"}, `virtualmachineinstancereplicaset "missing" not found`},
	} {
		if _, _, err := run(t, ep, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", strings.Join(tc.args, " "), err, tc.want)
		}
	}

	if out := mustRun(t, ep, "delete", "rs", "web"); out != "virtualmachineinstancereplicaset \"web\" deleted\n" {
		t.Errorf("delete rs printed %q", out)
	}
	if out := mustRun(t, ep, "delete", "pool", "db", "--wait"); out != "virtualmachinepool \"db\" deleted\n" {
		t.Errorf("delete pool printed %q", out)
	}
	if out, errOut, err := run(t, ep, "get", "rs"); err != nil || out != "" || errOut != "No resources found in default namespace.\n" {
		t.Errorf("get rs after delete: %q, %q, %v", out, errOut, err)
	}
}

// A replica set's template is checked as a VM's is, and what only a
// replica cannot have is named.
func TestApplyInvalidReplicaSet(t *testing.T) {
	_, ep := startAPI(t)
	rs := strings.Replace(readFile(t, "../../examples/replicaset.yaml"), "- name: default # no mac_address: each instance gets its own",
		"- name: default\n              mac_address: 02:00:00:00:00:01", 1)
	rs = strings.Replace(rs, "guest: 256Mi", "guest: 256MB", 1)
	_, _, err := runIn(t, ep, rs, "apply", "-f", "-")
	want := `VirtualMachineInstanceReplicaSet "web" is invalid:
  - spec.template.spec.domain.memory.guest: Invalid value: "256MB": `
	if err == nil || !strings.HasPrefix(err.Error(), want) ||
		!strings.Contains(err.Error(), "\n  - spec.template.spec.domain.devices.interfaces[0].mac_address: Forbidden: every replica would have the same MAC address") {
		t.Errorf("apply: %v", err)
	}
}

func TestGetWatchReplicaSets(t *testing.T) {
	_, ep := startAPI(t)
	mustRun(t, ep, "apply", "-f", "../../examples/replicaset.yaml")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut testutil.SyncBuffer
	done := make(chan error, 1)
	go func() { done <- runCmd(ctx, ep, "", &out, &errOut, "get", "rs", "-w") }()
	header := "NAME                   DESIRED   CURRENT   READY   AGE\n"
	row := func(desired string) string {
		return "web                    " + desired + "         0         0       3h\n"
	}
	testutil.Eventually(t, 10*time.Second, "the first row", func() bool { return out.String() == header+row("3") })
	mustRun(t, ep, "scale", "rs", "web", "--replicas", "4")
	testutil.Eventually(t, 10*time.Second, "the scaled row", func() bool { return out.String() == header+row("3")+row("4") })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("get -w: %v", err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
