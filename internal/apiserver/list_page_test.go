package apiserver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// An admin pages through VMs over gRPC: every VM once, all pages at one
// revision; without a limit the list is whole and sorted, as before.
func TestListVMsInPages(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var want []string
	for i := range 7 {
		name := fmt.Sprintf("vm-%d", i)
		if _, err := f.vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: validVM(name)}); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	whole, err := f.vms.List(ctx, &apiv1.ListVirtualMachinesRequest{Options: &apiv1.ListOptions{}})
	if err != nil || len(whole.Items) != 7 || whole.Continue != "" {
		t.Fatalf("list without limit: %d items, continue %q, %v", len(whole.GetItems()), whole.GetContinue(), err)
	}
	pages := 0
	items, rev, err := client.ListAll(ctx, &apiv1.ListOptions{Limit: 2}, func(ctx context.Context, o *apiv1.ListOptions) (*apiv1.ListVirtualMachinesResponse, error) {
		pages++
		resp, err := f.vms.List(ctx, &apiv1.ListVirtualMachinesRequest{Options: o})
		if err == nil && len(resp.Items) > 2 {
			t.Errorf("page of %d, limit 2", len(resp.Items))
		}
		return resp, err
	})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, vm := range items {
		got = append(got, vm.Metadata.Name)
	}
	if !slices.Equal(got, want) || pages != 4 || rev != whole.ResourceVersion {
		t.Errorf("pages %d, got %v at %d, want %v at %d", pages, got, rev, want, whole.ResourceVersion)
	}

	_, err = f.vms.List(ctx, &apiv1.ListVirtualMachinesRequest{Options: &apiv1.ListOptions{Limit: 2, Continue: "garbage!"}})
	if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "continue") {
		t.Errorf("bad token: %v, want InvalidArgument naming continue", err)
	}
	_, err = f.vms.List(ctx, &apiv1.ListVirtualMachinesRequest{Options: &apiv1.ListOptions{Limit: -1}})
	if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "limit") {
		t.Errorf("negative limit: %v, want InvalidArgument naming limit", err)
	}
}

// A node pages through its own instances only: the authorization of the
// list applies to every page, and another node's token gives no access to
// the first node's instances.
func TestNodeListsOwnInstancesInPages(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for i := range 6 {
		node := fmt.Sprintf("host-%d", i%2+1)
		if _, err := f.st.VMIs.Create(ctx, &apiv1.VirtualMachineInstance{
			Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("vmi-%d", i), Labels: map[string]string{apiv1.LabelNodeName: node}},
			Status:   &apiv1.VirtualMachineInstanceStatus{NodeName: node},
		}); err != nil {
			t.Fatal(err)
		}
	}
	svc := newVMIService(f.srv)
	info := &grpc.UnaryServerInfo{FullMethod: apiv1.VirtualMachineInstances_List_FullMethodName}
	list := func(node, selector, cont string) (*apiv1.ListVirtualMachineInstancesResponse, error) {
		req := &apiv1.ListVirtualMachineInstancesRequest{Options: &apiv1.ListOptions{LabelSelector: selector, Limit: 2, Continue: cont}}
		resp, err := f.srv.authorizeUnary(WithIdentity(ctx, Identity{Kind: Node, Node: node}), req, info, func(ctx context.Context, req any) (any, error) {
			return svc.List(ctx, req.(*apiv1.ListVirtualMachineInstancesRequest))
		})
		out, _ := resp.(*apiv1.ListVirtualMachineInstancesResponse)
		return out, err
	}
	own := apiv1.LabelNodeName + "=host-1"
	var seen []string
	var tokens []string
	for cont := ""; ; {
		resp, err := list("host-1", own, cont)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range resp.Items {
			seen = append(seen, v.Metadata.Name+"@"+v.Status.NodeName)
		}
		if resp.Continue == "" {
			break
		}
		cont = resp.Continue
		tokens = append(tokens, cont)
	}
	if want := []string{"vmi-0@host-1", "vmi-2@host-1", "vmi-4@host-1"}; !slices.Equal(seen, want) {
		t.Errorf("host-1 paged %v, want %v", seen, want)
	}
	for _, tok := range tokens {
		// host-2 with host-1's token: its own selector still filters.
		resp, err := list("host-2", apiv1.LabelNodeName+"=host-2", tok)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range resp.Items {
			if v.Status.NodeName != "host-2" {
				t.Errorf("host-2 read %s of %s through a token", v.Metadata.Name, v.Status.NodeName)
			}
		}
		// and with host-1's selector it is refused, as any list is.
		if _, err := list("host-2", own, tok); code(err) != codes.PermissionDenied {
			t.Errorf("host-2 paging host-1's instances: %v, want PermissionDenied", err)
		}
	}
}
