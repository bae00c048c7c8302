package apiserver

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// wantDenied checks a refusal's code and that its message says what it
// must (who, the roles held, what would allow it).
func wantDenied(t *testing.T, what string, err error, msg string) {
	t.Helper()
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), msg) {
		t.Errorf("%s: got %v, want PermissionDenied saying %q", what, err, msg)
	}
}

func vmIn(ns, name string) *apiv1.VirtualMachine {
	vm := validVM(name)
	vm.Metadata.Namespace = ns
	return vm
}

// A user's token gives what its bindings give, in their namespaces, and
// refusals name who, the roles held and the role that would allow it.
func TestUserRolesAndRefusals(t *testing.T) {
	e := newSecEnv(t, Limits{})
	eddie := e.user("eddie", "edit a")
	vic := e.user("vic", "view a")

	if _, err := eddie.c.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: vmIn("a", "web")}); err != nil {
		t.Fatalf("edit of a creating a VM in a: %v", err)
	}
	_, err := eddie.c.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: vmIn("b", "web")})
	wantDenied(t, "edit of a creating in b", err, "user eddie (edit in a) may not call VirtualMachines.Create in namespace b: needs edit in b")
	_, err = vic.c.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: vmIn("a", "db")})
	// Decided in the tap handle, before the request is read: vic holds
	// edit nowhere.
	wantDenied(t, "view of a creating in a", err, "user vic (view in a) may not call VirtualMachines.Create in namespace a: needs edit in a")
	if _, err := vic.c.VMs.Get(ctx(), &apiv1.GetVirtualMachineRequest{Key: &apiv1.ObjectKey{Namespace: "a", Name: "web"}}); err != nil {
		t.Fatalf("view of a reading a VM in a: %v", err)
	}
	_, err = eddie.c.StorageClasses.Create(ctx(), &apiv1.CreateStorageClassRequest{})
	wantDenied(t, "edit of a making a storage class", err, "user eddie (edit in a) may not call StorageClasses.Create: needs cluster-admin")
	_, err = eddie.c.VMs.List(ctx(), &apiv1.ListVirtualMachinesRequest{})
	wantDenied(t, "edit of a listing all namespaces", err, "in all namespaces: needs view in every namespace (a ClusterRoleBinding); set the namespace")
	if _, err := eddie.c.StorageClasses.List(ctx(), &apiv1.ListStorageClassesRequest{}); err != nil {
		t.Fatalf("edit of a reading storage classes (VM specs name them): %v", err)
	}

	// A user with no binding may call nothing but Auth.
	nobody := e.user("nobody")
	_, err = nobody.c.StorageClasses.List(ctx(), &apiv1.ListStorageClassesRequest{})
	wantDenied(t, "a user without a role", err, "user nobody (no role) may not call StorageClasses.List")
	who, err := apiv1.NewAuthClient(nobody.c.Conn).WhoAmI(ctx(), &apiv1.WhoAmIRequest{})
	if err != nil || who.Identity != "user nobody" || who.Credential != nobody.cred || who.Expires == nil {
		t.Fatalf("WhoAmI = %v, %v", who, err)
	}

	// CanI answers as the call would.
	can, err := apiv1.NewAuthClient(vic.c.Conn).CanI(ctx(), &apiv1.CanIRequest{Method: "VirtualMachines.Create", Namespace: "a"})
	if err != nil || can.Allowed || !strings.Contains(can.Reason, "needs edit") {
		t.Fatalf("CanI create as view: %v, %v", can, err)
	}
	can, err = apiv1.NewAuthClient(eddie.c.Conn).CanI(ctx(), &apiv1.CanIRequest{Method: apiv1.VirtualMachines_Create_FullMethodName, Namespace: "a"})
	if err != nil || !can.Allowed {
		t.Fatalf("CanI create as edit: %v, %v", can, err)
	}

	// A cluster-wide view reads every namespace; a service account's
	// token works as a user's.
	ci := e.serviceAccount("ci", "deployer", "view *")
	if _, err := ci.c.VMs.List(ctx(), &apiv1.ListVirtualMachinesRequest{}); err != nil {
		t.Fatalf("cluster viewer listing all namespaces: %v", err)
	}
	_, err = ci.c.VMs.Delete(ctx(), &apiv1.DeleteVirtualMachineRequest{Key: &apiv1.ObjectKey{Namespace: "a", Name: "web"}})
	wantDenied(t, "cluster viewer deleting", err, "serviceaccount ci/deployer (view in every namespace) may not call VirtualMachines.Delete in namespace a: needs edit in a")
}

// The identity kinds are validated with field paths, and updated with the
// version they were read at.
func TestIdentityKindsValidateAndUpdate(t *testing.T) {
	e := newSecEnv(t, Limits{})
	admin := e.admin()
	rbs := apiv1.NewRoleBindingsClient(admin.Conn)
	_, err := rbs.Create(ctx(), &apiv1.CreateRoleBindingRequest{RoleBinding: &apiv1.RoleBinding{
		Metadata: &apiv1.ObjectMeta{Namespace: "a", Name: "x"},
		Spec:     &apiv1.RoleBindingSpec{Role: "cluster-admin", Subjects: []*apiv1.Subject{{Kind: "Group", Name: "devs"}}}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "spec.role") || !strings.Contains(err.Error(), "spec.subjects[0].kind") {
		t.Fatalf("an invalid role binding: %v", err)
	}
	_, err = apiv1.NewUsersClient(admin.Conn).Create(ctx(), &apiv1.CreateUserRequest{User: &apiv1.User{Metadata: &apiv1.ObjectMeta{Name: "Alice"}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "metadata.name") {
		t.Fatalf("an invalid user name: %v", err)
	}
	_, err = apiv1.NewClusterRoleBindingsClient(admin.Conn).Create(ctx(), &apiv1.CreateClusterRoleBindingRequest{ClusterRoleBinding: &apiv1.ClusterRoleBinding{
		Metadata: &apiv1.ObjectMeta{Name: "x"}, Spec: &apiv1.RoleBindingSpec{Role: "owner", Subjects: []*apiv1.Subject{{Kind: "User", Name: "a"}}}}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "spec.role") {
		t.Fatalf("an invalid cluster role: %v", err)
	}

	rb, err := rbs.Create(ctx(), &apiv1.CreateRoleBindingRequest{RoleBinding: &apiv1.RoleBinding{
		Metadata: &apiv1.ObjectMeta{Namespace: "a", Name: "devs"},
		Spec:     &apiv1.RoleBindingSpec{Role: apiv1.RoleView, Subjects: []*apiv1.Subject{{Kind: apiv1.SubjectUser, Name: "alice"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	stale := rb.Metadata.ResourceVersion
	rb.Spec.Role = apiv1.RoleEdit
	if rb, err = rbs.Update(ctx(), &apiv1.UpdateRoleBindingRequest{RoleBinding: rb}); err != nil || rb.Spec.Role != apiv1.RoleEdit {
		t.Fatalf("update: %v, %v", rb, err)
	}
	rb.Metadata.ResourceVersion = stale
	_, err = rbs.Update(ctx(), &apiv1.UpdateRoleBindingRequest{RoleBinding: rb})
	wantCode(t, "an update of a stale version", err, codes.Aborted)

	users := apiv1.NewUsersClient(admin.Conn)
	u, err := users.Create(ctx(), &apiv1.CreateUserRequest{User: &apiv1.User{Metadata: &apiv1.ObjectMeta{Name: "alice"}, Spec: &apiv1.UserSpec{Description: "Alice"}}})
	if err != nil {
		t.Fatal(err)
	}
	u.Spec.Description = "Alice Smith"
	if u, err = users.Update(ctx(), &apiv1.UpdateUserRequest{User: u}); err != nil || u.Spec.Description != "Alice Smith" {
		t.Fatalf("user update: %v, %v", u, err)
	}
	list, err := users.List(ctx(), &apiv1.ListUsersRequest{})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("users: %v, %v", list, err)
	}
}

// A call no role of the caller could allow is refused in the tap handle,
// before its body is read; one that needs the namespace is decided after
// decoding, and refused then.
func TestMethodRefusalsReadNoBody(t *testing.T) {
	e := newSecEnv(t, Limits{})
	vic := e.user("vic", "view a")
	nobody := e.user("nobody")
	_, err := vic.c.StorageClasses.Create(ctx(), &apiv1.CreateStorageClassRequest{})
	wantDenied(t, "a viewer making a class", err, "needs cluster-admin")
	_, err = nobody.c.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: vmIn("a", "web")})
	wantDenied(t, "a caller with no role creating", err, "user nobody (no role) may not call VirtualMachines.Create: needs edit in the request's namespace")
	if n := e.payloads.count(apiv1.VirtualMachines_Create_FullMethodName) + e.payloads.count(apiv1.StorageClasses_Create_FullMethodName); n != 0 {
		t.Fatalf("the server read %d bodies of calls refused by method", n)
	}
	// A caller with a role is refused with the namespace named, which
	// needs the body.
	_, err = vic.c.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: vmIn("a", "web")})
	wantDenied(t, "a viewer creating", err, "user vic (view in a) may not call VirtualMachines.Create in namespace a: needs edit in a")
	if n := e.payloads.count(apiv1.VirtualMachines_Create_FullMethodName); n != 1 {
		t.Fatalf("the server read %d bodies; the namespace check needs the one", n)
	}
}

// The annotation that lets a backup restore take another namespace's
// backup is the server's, set for cluster-admins only: an editor's
// restore never has it, whatever it asks.
func TestOnlyClusterAdminsRestoreAnyNamespacesBackups(t *testing.T) {
	e := newSecEnv(t, Limits{})
	eddie := e.user("eddie", "edit a")
	if _, err := e.admin().BackupTargets.Create(ctx(), &apiv1.CreateBackupTargetRequest{BackupTarget: s3Target("s3")}); err != nil {
		t.Fatal(err)
	}
	restore := func(name string) *apiv1.VirtualMachineBackupRestore {
		return &apiv1.VirtualMachineBackupRestore{
			Metadata: &apiv1.ObjectMeta{Namespace: "a", Name: name, Annotations: map[string]string{apiv1.AnnotationAnyNamespaceRestore: "true"}},
			Spec:     &apiv1.VirtualMachineBackupRestoreSpec{Target: "s3", BackupId: "6f1c2a3e-0000-4000-8000-0000000000b1", VmName: name + "-vm"},
		}
	}
	for _, tc := range []struct {
		who  *client.Client
		name string
		want bool
	}{{eddie.c, "by-editor", false}, {e.admin(), "by-admin", true}} {
		got, err := tc.who.BackupRestores.Create(ctx(), &apiv1.CreateBackupRestoreRequest{BackupRestore: restore(tc.name)})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if has := got.GetMetadata().GetAnnotations()[apiv1.AnnotationAnyNamespaceRestore] == "true"; has != tc.want {
			t.Fatalf("%s: any-namespace annotation %v, want %v", tc.name, has, tc.want)
		}
	}
}
