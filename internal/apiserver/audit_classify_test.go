package apiserver

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/audit"
)

// apiMethods are the full names of every method of the API.
func apiMethods() []protoreflect.MethodDescriptor {
	var out []protoreflect.MethodDescriptor
	for _, svc := range apiv1.Services() {
		for i := range svc.Methods().Len() {
			out = append(out, svc.Methods().Get(i))
		}
	}
	return out
}

func fullName(m protoreflect.MethodDescriptor) string {
	return fmt.Sprintf("/%s/%s", m.Parent().FullName(), m.Name())
}

// Every method is classified on purpose: by its verb or by its own entry,
// and an entry names a method that exists.
func TestEveryMethodIsAuditClassified(t *testing.T) {
	all := map[string]bool{}
	for _, m := range apiMethods() {
		full := fullName(m)
		all[full] = true
		if _, ok := auditClassOf(full); !ok {
			t.Errorf("%s: not classified for the audit trail: add it to auditMethods in audit.go (recorded or not, and why)", full)
		}
	}
	for m := range auditMethods {
		if !all[m] {
			t.Errorf("auditMethods names %s, which the API does not have", m)
		}
	}
}

// The classes the issue names, as the server applies them to callers.
func TestAuditedCalls(t *testing.T) {
	s := New(Stores{}, Options{Audit: &audit.Logger{}})
	admin, node := Identity{Kind: Admin}, Identity{Kind: Node, Node: "n1"}
	for _, c := range []struct {
		id     Identity
		method string
		want   bool
	}{
		{admin, apiv1.VirtualMachines_Create_FullMethodName, true},
		{admin, apiv1.VirtualMachines_Update_FullMethodName, true},
		{admin, apiv1.VirtualMachines_Delete_FullMethodName, true},
		{admin, apiv1.VirtualMachines_Migrate_FullMethodName, true},
		{admin, apiv1.Migrations_Create_FullMethodName, true},
		{admin, apiv1.Exports_Create_FullMethodName, true},
		{admin, apiv1.Consoles_Attach_FullMethodName, true},
		{admin, apiv1.Credentials_IssueToken_FullMethodName, true},
		{admin, apiv1.RoleBindings_Create_FullMethodName, true},
		{admin, apiv1.Snapshots_UpdateStatus_FullMethodName, true},
		{Identity{Kind: Anonymous, Peer: "10.0.0.9"}, apiv1.Bootstrap_Join_FullMethodName, true},
		{node, apiv1.Nodes_Register_FullMethodName, true},
		{admin, apiv1.VirtualMachines_Get_FullMethodName, false},
		{admin, apiv1.VirtualMachines_List_FullMethodName, false},
		{admin, apiv1.VirtualMachines_Watch_FullMethodName, false},
		{admin, apiv1.Auth_WhoAmI_FullMethodName, false},
		{admin, apiv1.Auth_CanI_FullMethodName, false},
		{admin, apiv1.Audit_Read_FullMethodName, false},
		{node, apiv1.Nodes_Heartbeat_FullMethodName, false},
		{node, apiv1.VirtualMachineInstances_UpdateStatus_FullMethodName, false},
		{node, apiv1.Images_UpdateNodeStatus_FullMethodName, false},
		{node, apiv1.Bootstrap_Renew_FullMethodName, false},
		{node, apiv1.Consoles_Serve_FullMethodName, false},
		// The same reports made by an admin are not routine.
		{admin, apiv1.Nodes_Heartbeat_FullMethodName, true},
		{admin, apiv1.VirtualMachineInstances_UpdateStatus_FullMethodName, true},
	} {
		if got := s.audited(c.id, c.method); got != c.want {
			t.Errorf("%s calling %s: audited %v, want %v", c.id, c.method, got, c.want)
		}
	}
	s.opts.AuditNodeReports = true
	if !s.audited(node, apiv1.Nodes_Heartbeat_FullMethodName) {
		t.Error("with AuditNodeReports a node's heartbeat is not recorded")
	}
	if (&Server{}).audited(admin, apiv1.VirtualMachines_Create_FullMethodName) {
		t.Error("a server without an audit log records")
	}
}

// fillNames sets every name, namespace and node_name string of m and of
// its singular message fields (depth levels down) to tell-tale values.
func fillNames(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		switch {
		case fd.Cardinality() == protoreflect.Repeated || fd.ContainingOneof() != nil && fd.Kind() == protoreflect.MessageKind:
		case fd.Kind() == protoreflect.StringKind && (fd.Name() == "name" || fd.Name() == "node_name"):
			m.Set(fd, protoreflect.ValueOfString("the-name"))
		case fd.Kind() == protoreflect.StringKind && fd.Name() == "namespace":
			m.Set(fd, protoreflect.ValueOfString("the-ns"))
		case fd.Kind() == protoreflect.MessageKind && depth > 0:
			fillNames(m.Mutable(fd).Message(), depth-1)
		}
	}
}

// noObject are the recorded methods whose request names no object: the
// record names the caller and the method alone.
var noObject = map[string]string{
	apiv1.Bootstrap_Renew_FullMethodName: "the calling node's own certificate",
	// A node answering a console session (recorded only with
	// AuditNodeReports): the Attach that opened it names the VM.
	apiv1.Consoles_Serve_FullMethodName: "a session, by its id",
}

// Every recorded method's request yields the name of the object it is
// about, found by the field conventions alone.
func TestEveryRecordedMethodNamesItsObject(t *testing.T) {
	for _, m := range apiMethods() {
		full := fullName(m)
		if c, _ := auditClassOf(full); c == auditNever {
			continue
		}
		mt, err := protoregistry.GlobalTypes.FindMessageByName(m.Input().FullName())
		if err != nil {
			t.Fatal(err)
		}
		req := mt.New()
		fillNames(req, 3)
		_, name := auditObject(req.Interface())
		if _, ok := noObject[full]; ok {
			if name != "" {
				t.Errorf("%s: in noObject but names %q", full, name)
			}
			continue
		}
		if name != "the-name" {
			t.Errorf("%s: the record would name no object (%q) from %s", full, name, m.Input().FullName())
		}
	}
}

func TestAuditObjectAndUID(t *testing.T) {
	vm := validVM("web")
	vm.Metadata.Namespace = "a"
	vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes,
		&apiv1.Volume{Name: "ci", CloudInitNoCloud: &apiv1.CloudInitNoCloud{UserData: "secret"}})
	for _, c := range []struct {
		req      proto.Message
		ns, name string
	}{
		{&apiv1.CreateVirtualMachineRequest{Vm: vm}, "a", "web"},
		{&apiv1.DeleteVirtualMachineRequest{Key: &apiv1.ObjectKey{Namespace: "a", Name: "web"}}, "a", "web"},
		{&apiv1.DeleteVirtualMachineRequest{Key: &apiv1.ObjectKey{Name: "web"}}, "default", "web"},
		{&apiv1.ScaleRequest{Key: &apiv1.ObjectKey{Namespace: "b", Name: "pool"}, Replicas: 3}, "b", "pool"},
		{&apiv1.ConsoleInput{Open: &apiv1.ConsoleOpen{Namespace: "a", Name: "web"}}, "a", "web"},
		{&apiv1.JoinRequest{Token: "abc.def", NodeName: "n1"}, "", "n1"},
		{&apiv1.LabelNodeRequest{Name: "n1", Set: map[string]string{"k": "v"}}, "", "n1"},
		{&apiv1.IssueTokenRequest{Subject: &apiv1.Subject{Kind: "ServiceAccount", Namespace: "ci", Name: "deployer"}}, "ci", "deployer"},
		{&apiv1.CreateMigrationRequest{Migration: &apiv1.VirtualMachineInstanceMigration{Metadata: &apiv1.ObjectMeta{Namespace: "a", Name: "m1"}}}, "a", "m1"},
		{&apiv1.RenewRequest{CsrPem: []byte("x")}, "", ""},
		{nil, "", ""},
	} {
		if ns, name := auditObject(c.req); ns != c.ns || name != c.name {
			t.Errorf("%T: %q/%q, want %q/%q", c.req, ns, name, c.ns, c.name)
		}
	}
	meta := &apiv1.ObjectMeta{Namespace: "a", Name: "x", Uid: "uid-1"}
	for _, c := range []struct {
		resp proto.Message
		uid  string
	}{
		{&apiv1.VirtualMachine{Metadata: meta}, "uid-1"},
		{&apiv1.CreateExportResponse{Export: &apiv1.VirtualMachineExport{Metadata: meta}, Token: "tok"}, "uid-1"},
		{&apiv1.IssueTokenResponse{Credential: &apiv1.Credential{Metadata: meta}, Token: "vpt_x.y"}, "uid-1"},
		{&apiv1.CreateBootstrapTokenResponse{Token: "a.b"}, ""},
		{nil, ""},
	} {
		ns, name, uid := auditAnswer(c.resp)
		if uid != c.uid || c.uid != "" && (ns != "a" || name != "x") {
			t.Errorf("%T: %q/%q uid %q, want a/x uid %q", c.resp, ns, name, uid, c.uid)
		}
	}
	// A generated name comes from the answer; a requested one stays.
	c := auditCall{}
	c.answer(&apiv1.VirtualMachineInstanceMigration{Metadata: &apiv1.ObjectMeta{Namespace: "a", Name: "web-migration-x", Uid: "u"}})
	if c.namespace != "a" || c.name != "web-migration-x" || c.uid != "u" {
		t.Errorf("generated name: %+v", c)
	}
	c = auditCall{name: "m"}
	c.answer(&apiv1.VirtualMachineInstanceMigration{Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "m"}})
	if c.namespace != "default" {
		t.Errorf("the default namespace: %+v", c)
	}
	c = auditCall{namespace: "a", name: "asked"}
	c.answer(&apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{Namespace: "b", Name: "other", Uid: "u"}})
	if c.namespace != "a" || c.name != "asked" || c.uid != "u" {
		t.Errorf("requested name: %+v", c)
	}
}
