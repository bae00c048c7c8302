package apiserver

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
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
	wantDenied(t, "view of a creating in a", err, "user vic (view in a) may not call VirtualMachines.Create: needs edit in the request's namespace")
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
	wantDenied(t, "cluster viewer deleting", err, "serviceaccount ci/deployer (view in every namespace) may not call VirtualMachines.Delete: needs edit in the request's namespace")
}
