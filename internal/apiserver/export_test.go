package apiserver

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func exportOf(name, vm, ttl string) *apiv1.VirtualMachineExport {
	return &apiv1.VirtualMachineExport{
		Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: name},
		Spec:     &apiv1.VirtualMachineExportSpec{SourceName: vm, TtlDuration: ttl},
	}
}

// The token is told once, in Create's answer, and kept only as its hash;
// no status write replaces the hash or the expiry.
func TestExportTokenIsToldOnceAndKeptAsAHash(t *testing.T) {
	e := newSecEnv(t, Limits{})
	admin := e.admin()
	before := time.Now()
	resp, err := admin.Exports.Create(ctx(), &apiv1.CreateExportRequest{Export: exportOf("ex", "vm", "")})
	if err != nil {
		t.Fatal(err)
	}
	tok, ex := resp.GetToken(), resp.GetExport()
	if len(tok) != 43 {
		t.Fatalf("token %d characters, want 43 (256 bits, base64url)", len(tok))
	}
	st := ex.GetStatus()
	if st.GetTokenSha256() != apiv1.ExportTokenHash(tok) || st.GetPhase() != apiv1.ExportPending ||
		ex.GetSpec().GetSourceKind() != apiv1.KindVirtualMachine || ex.GetSpec().GetTtlDuration() != "2h0m0s" {
		t.Fatalf("export as made: %v", ex)
	}
	if exp := st.GetExpirationTime().AsTime(); exp.Before(before.Add(2*time.Hour-time.Minute)) || exp.After(time.Now().Add(2*time.Hour)) {
		t.Errorf("expiry %s, want 2h from now", exp)
	}
	got, err := admin.Exports.Get(ctx(), &apiv1.GetExportRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: "ex"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(prototext.Format(got), tok) {
		t.Fatal("a read of the export carries its token")
	}
	other, err := admin.Exports.Create(ctx(), &apiv1.CreateExportRequest{Export: exportOf("ex2", "vm", "30m")})
	if err != nil {
		t.Fatal(err)
	}
	if other.GetToken() == tok {
		t.Fatal("two exports got one token")
	}

	next := proto.Clone(got).(*apiv1.VirtualMachineExport)
	next.Status.TokenSha256 = apiv1.ExportTokenHash("mine")
	next.Status.ExpirationTime = nil
	next.Status.Phase = apiv1.ExportReady
	out, err := admin.Exports.UpdateStatus(ctx(), &apiv1.UpdateExportStatusRequest{Export: next})
	if err != nil {
		t.Fatal(err)
	}
	if out.GetStatus().GetTokenSha256() != apiv1.ExportTokenHash(tok) || out.GetStatus().GetExpirationTime() == nil || out.GetStatus().GetPhase() != apiv1.ExportReady {
		t.Fatalf("status write replaced the token hash or expiry: %v", out.GetStatus())
	}
}

func TestExportCreateRefusals(t *testing.T) {
	e := newSecEnv(t, Limits{})
	admin := e.admin()
	for _, c := range []struct {
		ex   *apiv1.VirtualMachineExport
		want string
	}{
		{exportOf("a", "vm", "1s"), "spec.ttl_duration"},
		{exportOf("b", "vm", "169h"), "spec.ttl_duration"},
		{exportOf("c", "vm", "soon"), "spec.ttl_duration"},
		{exportOf("d", "", ""), "spec.source_name"},
		{&apiv1.VirtualMachineExport{Metadata: &apiv1.ObjectMeta{Name: "e"},
			Spec: &apiv1.VirtualMachineExportSpec{SourceKind: "Pod", SourceName: "vm"}}, "spec.source_kind"},
	} {
		_, err := admin.Exports.Create(ctx(), &apiv1.CreateExportRequest{Export: c.ex})
		wantCode(t, c.want, err, codes.InvalidArgument)
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %q does not name %s", c.ex.GetSpec(), err, c.want)
		}
	}
}

// A node reads only the exports labelled with it (the ones it serves),
// and makes, changes and deletes none.
func TestNodeSeesOnlyItsOwnExports(t *testing.T) {
	e := newSecEnv(t, Limits{})
	a, b := e.join("node-a"), e.join("node-b")
	ex := exportOf("ex", "vm", "")
	ex.Metadata.Labels = map[string]string{apiv1.LabelNodeName: "node-a"}
	if _, err := e.st.Exports.Create(ctx(), ex); err != nil {
		t.Fatal(err)
	}
	key := &apiv1.ObjectKey{Namespace: "default", Name: "ex"}
	if _, err := a.c.Exports.Get(ctx(), &apiv1.GetExportRequest{Key: key}); err != nil {
		t.Fatalf("node-a reading its export: %v", err)
	}
	_, err := b.c.Exports.Get(ctx(), &apiv1.GetExportRequest{Key: key})
	wantCode(t, "node-b reading node-a's export", err, codes.PermissionDenied)
	_, err = b.c.Exports.List(ctx(), &apiv1.ListExportsRequest{})
	wantCode(t, "node-b listing every export", err, codes.PermissionDenied)
	w, err := b.c.Exports.Watch(ctx(), &apiv1.WatchExportsRequest{Options: &apiv1.WatchOptions{LabelSelector: apiv1.LabelNodeName + "=node-a"}})
	if err == nil {
		_, err = w.Recv()
	}
	wantCode(t, "node-b watching node-a's exports", err, codes.PermissionDenied)
	_, err = a.c.Exports.Create(ctx(), &apiv1.CreateExportRequest{Export: exportOf("mine", "vm", "")})
	wantCode(t, "node-a making an export", err, codes.PermissionDenied)
	_, err = a.c.Exports.Delete(ctx(), &apiv1.DeleteExportRequest{Key: key})
	wantCode(t, "node-a deleting its export", err, codes.PermissionDenied)
	_, err = a.c.Exports.UpdateStatus(ctx(), &apiv1.UpdateExportStatusRequest{Export: ex})
	wantCode(t, "node-a writing its export's status", err, codes.PermissionDenied)
}
