package provider

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// Importing a VM by adopting a libvirt domain (docs/adopt.md):
//
//	terraform import virtplane_virtual_machine.web adopt:NODE/DOMAIN
//	terraform import virtplane_virtual_machine.web adopt:NODE/DOMAIN/NAMESPACE/NAME
//
// makes the adoption (the VM's namespace and name: the domain's name in
// the default namespace when not given), waits until the node took the
// running domain over, and imports the VM it made. What the domain cannot
// be adopted for is the import's error, element by element; nothing is
// imported then. `virtplane-agent adopt DOMAIN --node NODE --dry-run`
// shows the spec to write in the configuration first.

// adoptImportPrefix starts an import id that adopts a domain.
const adoptImportPrefix = "adopt:"

// adoptImportTimeout bounds the wait: the node maps the domain in
// seconds, and the take-over waits for the VM's instance to be placed.
const adoptImportTimeout = 5 * time.Minute

// parseAdoptID reads NODE/DOMAIN[/NAMESPACE/NAME] (after the prefix).
func parseAdoptID(id string) (node, domain, namespace, name string, err error) {
	parts := strings.Split(id, "/")
	switch len(parts) {
	case 2:
		node, domain, namespace, name = parts[0], parts[1], apiv1.DefaultNamespace, parts[1]
	case 4:
		node, domain, namespace, name = parts[0], parts[1], parts[2], parts[3]
	default:
		return "", "", "", "", fmt.Errorf("want %sNODE/DOMAIN or %sNODE/DOMAIN/NAMESPACE/NAME, got %q", adoptImportPrefix, adoptImportPrefix, adoptImportPrefix+id)
	}
	// The API's own checks, here so that a mistake is named before
	// anything is made.
	errs := validation.ValidateNodeName(node, field.NewPath("NODE"))
	if e := validation.CheckDomainName(domain); e != nil {
		errs = append(errs, field.Invalid(field.NewPath("DOMAIN"), domain, e.Error()))
	}
	errs = append(errs, validation.ValidateObjectKey(namespace, name, field.NewPath("VM"))...)
	if len(errs) > 0 {
		if len(parts) == 2 {
			return "", "", "", "", fmt.Errorf("%v (a domain whose name is no VM name is imported with %sNODE/DOMAIN/NAMESPACE/NAME)", errs.ToAggregate(), adoptImportPrefix)
		}
		return "", "", "", "", errs.ToAggregate()
	}
	return node, domain, namespace, name, nil
}

// importAdopted adopts the domain id names and imports the VM made of it.
func (r *vmResource) importAdopted(ctx context.Context, id string, resp *resource.ImportStateResponse) {
	node, domain, ns, name, err := parseAdoptID(id)
	if err != nil {
		resp.Diagnostics.AddError("Invalid import ID", err.Error())
		return
	}
	if !r.ready(&resp.Diagnostics, "adopt a libvirt domain") {
		return
	}
	c := r.data.client
	key := &apiv1.ObjectKey{Namespace: ns, Name: name}
	a, err := c.Adoptions.Create(ctx, &apiv1.CreateAdoptionRequest{Adoption: &apiv1.VirtualMachineAdoption{
		Metadata: &apiv1.ObjectMeta{Namespace: ns, Name: name},
		Spec:     &apiv1.VirtualMachineAdoptionSpec{NodeName: node, DomainName: domain, RunStrategy: apiv1.RunStrategyAlways},
	}})
	if status.Code(err) == codes.AlreadyExists {
		// An import run again after its adoption was made: the same
		// adoption is followed, any other is an error.
		a, err = c.Adoptions.Get(ctx, &apiv1.GetAdoptionRequest{Key: key})
		if err == nil && (a.GetSpec().GetNodeName() != node || a.GetSpec().GetDomainName() != domain || a.GetSpec().GetDryRun()) {
			err = fmt.Errorf("virtualmachineadoption %s exists for domain %s of node %s", apiv1.Ref(ns, name), a.GetSpec().GetDomainName(), a.GetSpec().GetNodeName())
		}
	}
	if err != nil {
		resp.Diagnostics.AddError("Cannot adopt domain "+domain,
			fmt.Sprintf("Making the adoption of domain %s of node %s as VM %s failed: %s", domain, node, apiv1.Ref(ns, name), status.Convert(err).Message()))
		return
	}
	wctx, cancel := context.WithTimeout(ctx, adoptImportTimeout)
	defer cancel()
	ops := namedOps[*apiv1.VirtualMachineAdoption, apiv1.AdoptionEvent]{
		get: func(ctx context.Context, key *apiv1.ObjectKey) (*apiv1.VirtualMachineAdoption, error) {
			return c.Adoptions.Get(ctx, &apiv1.GetAdoptionRequest{Key: key})
		},
		watch: func(ctx context.Context, o *apiv1.WatchOptions) (grpc.ServerStreamingClient[apiv1.AdoptionEvent], error) {
			return c.Adoptions.Watch(ctx, &apiv1.WatchAdoptionsRequest{Options: o})
		},
	}
	a, err = waitNamed(wctx, ops, "adoption "+apiv1.Ref(ns, name), key, judgeAdoption(a.GetMetadata().GetUid()))
	if err != nil {
		resp.Diagnostics.AddError("Cannot adopt domain "+domain, adoptionFailure(a, err))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), apiv1.Ref(ns, name))...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), ns)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("update_policy"), defaultUpdatePolicy)...)
}

// judgeAdoption: done once the domain is taken over; refused or failed
// ends the wait with the reason. uid is the adoption followed (one made
// again under the name is another).
func judgeAdoption(uid string) func(*apiv1.VirtualMachineAdoption) verdict {
	return func(a *apiv1.VirtualMachineAdoption) verdict {
		st := a.GetStatus()
		v := verdict{state: "phase " + st.GetPhase()}
		switch {
		case a.GetMetadata().GetUid() != uid:
			v.err = fmt.Errorf("the adoption was replaced by another of the same name")
		case st.GetPhase() == apiv1.AdoptionAdopted:
			v.done = true
		case st.GetPhase() == apiv1.AdoptionRefused || st.GetPhase() == apiv1.AdoptionFailed:
			v.err = fmt.Errorf("the adoption is %s", st.GetPhase())
		}
		return v
	}
}

// adoptionFailure words why an adoption did not end Adopted: its
// refusals, each element with why, or its message.
func adoptionFailure(a *apiv1.VirtualMachineAdoption, err error) string {
	st := a.GetStatus()
	var b strings.Builder
	fmt.Fprintf(&b, "Adopting domain %s of node %s: %v.", a.GetSpec().GetDomainName(), a.GetSpec().GetNodeName(), err)
	if m := st.GetMessage(); m != "" {
		b.WriteString(" " + m + ".")
	}
	if rs := st.GetRefusals(); len(rs) > 0 {
		b.WriteString(" What cannot be adopted:")
		for _, r := range rs {
			fmt.Fprintf(&b, "\n  - %s: %s", r.GetElement(), r.GetReason())
		}
	}
	b.WriteString("\nThe adoption object stays (virtplane-agent get vmadoption " + a.GetMetadata().GetName() + " -n " + a.GetMetadata().GetNamespace() + "); delete it to try again.")
	return b.String()
}

// withoutServerOwned is a VM template's annotations without those the
// server owns (apiv1.ServerOwnedTemplateAnnotation: the adoption that made
// the VM), which configurations do not manage.
func withoutServerOwned(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if !apiv1.ServerOwnedTemplateAnnotation(k) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// withServerOwned is want with the server-owned annotations of stored
// kept: an apply never drops them.
func withServerOwned(want, stored map[string]string) map[string]string {
	var out map[string]string
	for k, v := range stored {
		if apiv1.ServerOwnedTemplateAnnotation(k) {
			if out == nil {
				out = maps.Clone(want)
				if out == nil {
					out = map[string]string{}
				}
			}
			out[k] = v
		}
	}
	if out == nil {
		return want
	}
	return out
}
