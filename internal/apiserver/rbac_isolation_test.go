package apiserver

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// An edit token of namespace a reads, lists, watches, consoles into and
// migrates nothing of namespace b: not by key, label selector, paged list
// with a crafted continue token, list or watch of all namespaces, nor a
// watch by name.
func TestEditOfACannotReachB(t *testing.T) {
	e := newSecEnv(t, Limits{})
	admin := e.admin()
	for _, ns := range []string{"a", "b"} {
		for _, name := range []string{"web", "db"} {
			vm := vmIn(ns, name)
			vm.Metadata.Labels = map[string]string{"app": "shop"}
			if _, err := admin.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
				t.Fatal(err)
			}
		}
	}
	eddie := e.user("eddie", "edit a")
	c := eddie.c
	keyB := &apiv1.ObjectKey{Namespace: "b", Name: "web"}
	denied := func(what string, err error) {
		t.Helper()
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s: got %v, want PermissionDenied", what, err)
		}
	}

	_, err := c.VMs.Get(ctx(), &apiv1.GetVirtualMachineRequest{Key: keyB})
	denied("get in b", err)
	_, err = c.VMIs.Get(ctx(), &apiv1.GetVirtualMachineInstanceRequest{Key: keyB})
	denied("get an instance in b", err)
	_, err = c.VMs.List(ctx(), &apiv1.ListVirtualMachinesRequest{Options: &apiv1.ListOptions{Namespace: "b"}})
	denied("list b", err)
	_, err = c.VMs.List(ctx(), &apiv1.ListVirtualMachinesRequest{Options: &apiv1.ListOptions{Namespace: "b", LabelSelector: "app=shop"}})
	denied("list b by label", err)
	_, err = c.VMs.List(ctx(), &apiv1.ListVirtualMachinesRequest{Options: &apiv1.ListOptions{LabelSelector: "app=shop"}})
	denied("list all namespaces by label", err)
	_, err = c.VMs.List(ctx(), &apiv1.ListVirtualMachinesRequest{Options: &apiv1.ListOptions{Limit: 1}})
	denied("paged list of all namespaces", err)

	// Its own namespace lists only its own, page by page.
	var got []string
	opts := &apiv1.ListOptions{Namespace: "a", Limit: 1, LabelSelector: "app=shop"}
	for {
		page, err := c.VMs.List(ctx(), &apiv1.ListVirtualMachinesRequest{Options: opts})
		if err != nil {
			t.Fatal(err)
		}
		for _, vm := range page.Items {
			got = append(got, vm.Metadata.Namespace+"/"+vm.Metadata.Name)
		}
		if page.Continue == "" {
			break
		}
		opts.Continue = page.Continue
	}
	if len(got) != 2 || got[0] != "a/db" || got[1] != "a/web" {
		t.Fatalf("edit of a paged through %v, want a/db a/web", got)
	}
	// A continue token crafted to start in b, with the options' namespace
	// a: refused by the store, never a page of b.
	first, err := c.VMs.List(ctx(), &apiv1.ListVirtualMachinesRequest{Options: &apiv1.ListOptions{Namespace: "a", Limit: 1}})
	if err != nil {
		t.Fatal(err)
	}
	for _, start := range []string{"b/", "b/web", "a/../b/web", "ab/x"} {
		page, err := c.VMs.List(ctx(), &apiv1.ListVirtualMachinesRequest{Options: &apiv1.ListOptions{
			Namespace: "a", Limit: 10, Continue: store.EncodeContinue(first.ResourceVersion, start)}})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("continue from %q in namespace a: %v items, err %v; want InvalidArgument", start, len(page.GetItems()), err)
		}
	}

	watchDenied := func(what string, o *apiv1.WatchOptions) {
		t.Helper()
		w, err := c.VMs.Watch(ctx(), &apiv1.WatchVirtualMachinesRequest{Options: o})
		if err == nil {
			_, err = w.Recv()
		}
		denied(what, err)
	}
	watchDenied("watch b", &apiv1.WatchOptions{Namespace: "b"})
	watchDenied("watch all namespaces", &apiv1.WatchOptions{})
	watchDenied("watch by name in every namespace", &apiv1.WatchOptions{Name: "web"})
	watchDenied("watch by label in every namespace", &apiv1.WatchOptions{LabelSelector: "app=shop"})

	con, err := c.Consoles.Attach(ctx())
	if err == nil {
		if err = con.Send(&apiv1.ConsoleInput{Open: &apiv1.ConsoleOpen{Namespace: "b", Name: "web"}}); err == nil {
			_, err = con.Recv()
		}
	}
	denied("console into b", err)
	_, err = c.VMs.Migrate(ctx(), &apiv1.MigrateVirtualMachineRequest{Key: keyB})
	denied("migrate in b", err)
	_, err = c.Migrations.Create(ctx(), &apiv1.CreateMigrationRequest{Migration: &apiv1.VirtualMachineInstanceMigration{
		Metadata: &apiv1.ObjectMeta{Namespace: "b", Name: "m"}, Spec: &apiv1.VirtualMachineInstanceMigrationSpec{VmiName: "web"}}})
	denied("migration in b", err)
	_, err = c.VMIs.Evict(ctx(), &apiv1.EvictVirtualMachineInstanceRequest{Key: keyB})
	denied("evict in b", err)
	_, err = c.VMs.Delete(ctx(), &apiv1.DeleteVirtualMachineRequest{Key: keyB})
	denied("delete in b", err)
	if _, err := admin.VMs.Get(ctx(), &apiv1.GetVirtualMachineRequest{Key: keyB}); err != nil {
		t.Fatalf("b/web after edit of a's attempts: %v", err)
	}
}
