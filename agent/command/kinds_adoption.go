package command

import (
	"context"
	"strconv"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// The kind of adoption_service.proto (docs/adopt.md). `adopt` makes one
// and waits for it; get, delete and apply take it like the other kinds.
// Its spec cannot change: apply creates it, and applying it again is
// "unchanged" or refused (applyImmutable).

var adoptionResource = kind[*apiv1.VirtualMachineAdoption, *apiv1.AdoptionEvent]{
	resource: resource{
		Kind: apiv1.KindAdoption, Singular: "virtualmachineadoption", Namespaced: true,
		names: []string{"vmadoption", "vmadoptions", "adoption", "adoptions",
			"virtualmachineadoption", "virtualmachineadoptions"},
		columns: []string{"NAME", "NODE", "DOMAIN", "PHASE", "REFUSALS", "AGE"},
		// The domain's QEMU process and the VM made.
		wideColumns: []string{"QEMU-PID", "VM-UID"},
	},
	row: func(a *apiv1.VirtualMachineAdoption, now time.Time) []string {
		phase := adoptionPhase(a)
		if a.GetSpec().GetDryRun() {
			phase += " (dry run)"
		}
		return []string{
			a.GetMetadata().GetName(),
			cell(a.GetSpec().GetNodeName()),
			cell(a.GetSpec().GetDomainName()),
			phase,
			strconv.Itoa(len(a.GetStatus().GetRefusals())),
			age(a.GetMetadata().GetCreationTimestamp(), now),
		}
	},
	wide: func(a *apiv1.VirtualMachineAdoption) []string {
		pid := ""
		if p := a.GetStatus().GetQemuPid(); p > 0 {
			pid = strconv.Itoa(int(p))
		}
		return []string{cell(pid), cell(a.GetStatus().GetVmUid())}
	},
	get: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineAdoption, error) {
		return c.Adoptions.Get(ctx, &apiv1.GetAdoptionRequest{Key: key})
	},
	list: paged(func(ctx context.Context, c *client.Client, o *apiv1.ListOptions) (*apiv1.ListAdoptionsResponse, error) {
		return c.Adoptions.List(ctx, &apiv1.ListAdoptionsRequest{Options: o})
	}),
	watch: func(ctx context.Context, c *client.Client, o *apiv1.WatchOptions) (client.Stream[*apiv1.AdoptionEvent], error) {
		return c.Adoptions.Watch(ctx, &apiv1.WatchAdoptionsRequest{Options: o})
	},
	create: func(ctx context.Context, c *client.Client, a *apiv1.VirtualMachineAdoption) (*apiv1.VirtualMachineAdoption, error) {
		return c.Adoptions.Create(ctx, &apiv1.CreateAdoptionRequest{Adoption: a})
	},
	specDefaults: validation.DefaultAdoption,
	delete: func(ctx context.Context, c *client.Client, key *apiv1.ObjectKey) (*apiv1.VirtualMachineAdoption, error) {
		return c.Adoptions.Delete(ctx, &apiv1.DeleteAdoptionRequest{Key: key})
	},
}.define()
