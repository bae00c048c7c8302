package provider

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

var migT0 = time.Date(2026, 5, 6, 7, 8, 9, 0, time.FixedZone("CEST", 2*3600))

func testMig(name, vm, phase string, created time.Duration) *apiv1.VirtualMachineInstanceMigration {
	return &apiv1.VirtualMachineInstanceMigration{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name, CreationTimestamp: timestamppb.New(migT0.Add(created)),
			Labels: map[string]string{apiv1.LabelMigrationVMIName: vm}},
		Spec:   &apiv1.VirtualMachineInstanceMigrationSpec{VmiName: vm},
		Status: &apiv1.VirtualMachineInstanceMigrationStatus{Phase: phase},
	}
}

func TestMigrationToModel(t *testing.T) {
	done := testMig("web-migration-abcde", "web", apiv1.MigrationSucceeded, 0)
	done.Status.TargetNode = "node-b"
	done.Status.MigrationState = &apiv1.MigrationState{
		SourceNode: "node-a", TargetNode: "node-b", Method: apiv1.MigrationMethodBlock, Mode: apiv1.MigrationModePreCopy,
		StartTimestamp: timestamppb.New(migT0.Add(2 * time.Second)), EndTimestamp: timestamppb.New(migT0.Add(5 * time.Second)),
		Completed: true,
		Progress: &apiv1.MigrationProgress{DataTotalBytes: 300 << 20, DataProcessedBytes: 310 << 20, DataRemainingBytes: 0,
			DowntimeMs: 187, ElapsedMs: 3240},
	}
	want := migrationModel{
		Name: types.StringValue("web-migration-abcde"), Namespace: types.StringValue("default"), VM: types.StringValue("web"),
		Phase: types.StringValue("Succeeded"), Reason: types.StringNull(), Message: types.StringNull(),
		SourceNode: types.StringValue("node-a"), TargetNode: types.StringValue("node-b"),
		Method: types.StringValue("BlockMigration"), Mode: types.StringValue("PreCopy"),
		StartTime: types.StringValue("2026-05-06T05:08:11Z"), EndTime: types.StringValue("2026-05-06T05:08:14Z"),
		Completed: types.BoolValue(true), Failed: types.BoolValue(false), FailureReason: types.StringNull(), AbortStatus: types.StringNull(),
		DataTotalBytes: types.Int64Value(300 << 20), DataProcessedBytes: types.Int64Value(310 << 20), DataRemainingBytes: types.Int64Value(0),
		DowntimeMs: types.Int64Value(187), ElapsedMs: types.Int64Value(3240),
	}
	if got := migrationToModel(done); !reflect.DeepEqual(got, want) {
		t.Errorf("succeeded migration:\n got %+v\nwant %+v", got, want)
	}

	// A new migration: Pending, everything the nodes report null.
	got := migrationToModel(testMig("db-migration-fghij", "db", "", 0))
	if got.Phase.ValueString() != apiv1.MigrationPending || !got.SourceNode.IsNull() || !got.TargetNode.IsNull() ||
		!got.DataTotalBytes.IsNull() || !got.DowntimeMs.IsNull() || !got.StartTime.IsNull() || got.Completed.ValueBool() {
		t.Errorf("new migration: %+v", got)
	}

	// Waiting for a target: the controller's reason; target from the
	// instance's state when the status has none.
	waiting := testMig("db-migration-fghij", "db", apiv1.MigrationScheduling, 0)
	waiting.Status.Reason, waiting.Status.Message = "Unschedulable", "0/1 nodes are available: 1 node(s) were the source"
	if got := migrationToModel(waiting); got.Reason.ValueString() != "Unschedulable" || !strings.Contains(got.Message.ValueString(), "were the source") {
		t.Errorf("scheduling migration: %+v", got)
	}

	// Running: progress, but no downtime before the switch-over.
	running := testMig("db-migration-fghij", "db", apiv1.MigrationRunning, 0)
	running.Status.MigrationState = &apiv1.MigrationState{TargetNode: "node-c",
		Progress: &apiv1.MigrationProgress{DataTotalBytes: 100, DataProcessedBytes: 40, DataRemainingBytes: 60, ElapsedMs: 900}}
	got = migrationToModel(running)
	if got.TargetNode.ValueString() != "node-c" || got.DataRemainingBytes.ValueInt64() != 60 || !got.DowntimeMs.IsNull() || got.ElapsedMs.ValueInt64() != 900 {
		t.Errorf("running migration: %+v", got)
	}

	// Canceled mid-transfer.
	aborted := testMig("db-migration-fghij", "db", apiv1.MigrationFailed, 0)
	aborted.Status.MigrationState = &apiv1.MigrationState{SourceNode: "node-a", Completed: true, Failed: true,
		FailureReason: "canceled", AbortStatus: apiv1.MigrationAbortSucceeded}
	got = migrationToModel(aborted)
	if !got.Failed.ValueBool() || got.FailureReason.ValueString() != "canceled" || got.AbortStatus.ValueString() != "Succeeded" {
		t.Errorf("aborted migration: %+v", got)
	}
}

func TestMigrationModelsFilterAndSort(t *testing.T) {
	items := []*apiv1.VirtualMachineInstanceMigration{
		testMig("c", "web", apiv1.MigrationFailed, 2*time.Minute),
		testMig("b", "web", "", time.Minute),
		testMig("a", "db", apiv1.MigrationRunning, time.Minute),
		testMig("d", "db", apiv1.MigrationSucceeded, 0),
	}
	names := func(ms []migrationModel) []string {
		out := []string{}
		for _, m := range ms {
			out = append(out, m.Name.ValueString())
		}
		return out
	}
	for _, tt := range []struct {
		phase string
		want  []string
	}{
		{"", []string{"d", "a", "b", "c"}}, // oldest first, then by name
		{apiv1.MigrationPending, []string{"b"}},
		{apiv1.MigrationRunning, []string{"a"}},
		{apiv1.MigrationTargetReady, []string{}},
	} {
		if got := names(migrationModels(items, tt.phase)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("phase %q: %v, want %v", tt.phase, got, tt.want)
		}
	}
}

func TestMigrationsSchemaDocumentsEveryAttribute(t *testing.T) {
	s := documentedDataSource(t, NewMigrationsDataSource())
	nested := s.Attributes["migrations"].(schema.ListNestedAttribute).NestedObject.Attributes
	fields := reflect.TypeOf(migrationModel{})
	if fields.NumField() != len(nested) {
		t.Errorf("migrationModel has %d fields, schema %d attributes", fields.NumField(), len(nested))
	}
	for i := range fields.NumField() {
		if tag := fields.Field(i).Tag.Get("tfsdk"); nested[tag] == nil {
			t.Errorf("migrationModel field %s has no schema attribute", tag)
		}
	}
}

func TestMigrationsValidators(t *testing.T) {
	s := documentedDataSource(t, NewMigrationsDataSource())
	for _, tt := range []struct {
		attr, value string
		bad         bool
	}{
		{"phase", "Scheduling", false},
		{"phase", "scheduling", true},
		{"phase", "Migrating", true},
		{"vm", "web-1", false},
		{"vm", "Web_1", true},
		{"namespace", "prod", false},
		{"namespace", "", true},
	} {
		ok := true
		var msg string
		for _, v := range s.Attributes[tt.attr].(schema.StringAttribute).Validators {
			if ok, msg = validString(v, tt.value); !ok {
				break
			}
		}
		if ok == tt.bad {
			t.Errorf("%s = %q: valid %v (%s), want invalid %v", tt.attr, tt.value, ok, msg, tt.bad)
		}
	}
}

// fakeMigrationList answers List with items and records the request.
type fakeMigrationList struct {
	apiv1.UnimplementedMigrationsServer
	mu    sync.Mutex
	last  *apiv1.ListMigrationsRequest
	items []*apiv1.VirtualMachineInstanceMigration
	err   error
}

func (f *fakeMigrationList) List(_ context.Context, req *apiv1.ListMigrationsRequest) (*apiv1.ListMigrationsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = req
	return &apiv1.ListMigrationsResponse{Items: f.items}, f.err
}

// readMigrations runs the data source's Read with the configuration
// attrs (unset ones null) against fake.
func readMigrations(t *testing.T, fake *fakeMigrationList, attrs map[string]string) (*datasource.ReadResponse, migrationsDataSourceModel) {
	t.Helper()
	ctx := context.Background()
	conn := testutil.ServeGRPC(t, func(r grpc.ServiceRegistrar) { apiv1.RegisterMigrationsServer(r, fake) })
	ds := &migrationsDataSource{configuredDataSource{data: &providerData{client: client.New(conn), endpoint: "unix:///test.sock"}}}
	var sresp datasource.SchemaResponse
	ds.Schema(ctx, datasource.SchemaRequest{}, &sresp)
	typ := sresp.Schema.Type().TerraformType(ctx).(tftypes.Object)
	vals := map[string]tftypes.Value{}
	for name, at := range typ.AttributeTypes {
		if v, ok := attrs[name]; ok {
			vals[name] = tftypes.NewValue(tftypes.String, v)
		} else {
			vals[name] = tftypes.NewValue(at, nil)
		}
	}
	req := datasource.ReadRequest{Config: tfsdk.Config{Schema: sresp.Schema, Raw: tftypes.NewValue(typ, vals)}}
	resp := &datasource.ReadResponse{State: tfsdk.State{Schema: sresp.Schema, Raw: tftypes.NewValue(typ, nil)}}
	ds.Read(ctx, req, resp)
	var m migrationsDataSourceModel
	if !resp.Diagnostics.HasError() {
		resp.Diagnostics.Append(resp.State.Get(ctx, &m)...)
	}
	return resp, m
}

// Read lists the namespace (default "default") by the VM's label and
// filters by phase.
func TestMigrationsRead(t *testing.T) {
	fake := &fakeMigrationList{items: []*apiv1.VirtualMachineInstanceMigration{
		testMig("web-migration-2", "web", apiv1.MigrationScheduling, time.Minute),
		testMig("web-migration-1", "web", apiv1.MigrationFailed, 0),
	}}
	resp, m := readMigrations(t, fake, map[string]string{"vm": "web", "phase": "Scheduling"})
	if resp.Diagnostics.HasError() {
		t.Fatal(resp.Diagnostics)
	}
	if o := fake.last.GetOptions(); o.GetNamespace() != "default" || o.GetLabelSelector() != apiv1.LabelMigrationVMIName+"=web" {
		t.Errorf("listed %v", o)
	}
	if m.ID.ValueString() != "namespace=default;vm=web;phase=Scheduling" || m.Namespace.ValueString() != "default" ||
		len(m.Migrations) != 1 || m.Migrations[0].Name.ValueString() != "web-migration-2" {
		t.Errorf("read %+v", m)
	}

	resp, m = readMigrations(t, fake, map[string]string{"namespace": "prod"})
	if resp.Diagnostics.HasError() {
		t.Fatal(resp.Diagnostics)
	}
	if o := fake.last.GetOptions(); o.GetNamespace() != "prod" || o.GetLabelSelector() != "" {
		t.Errorf("listed %v", o)
	}
	if m.ID.ValueString() != "namespace=prod" || len(m.Migrations) != 2 {
		t.Errorf("read %+v", m)
	}

	fake.err = status.Error(codes.PermissionDenied, "migrations are admin-only")
	resp, _ = readMigrations(t, fake, nil)
	if errs := resp.Diagnostics.Errors(); len(errs) != 1 || !strings.Contains(errs[0].Detail(), "list migrations in namespace default") ||
		!strings.Contains(errs[0].Detail(), "admin-only") {
		t.Errorf("a refused list: %v", resp.Diagnostics)
	}
}
