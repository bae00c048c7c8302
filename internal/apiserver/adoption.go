package apiserver

import (
	"context"
	"errors"
	"maps"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// adoptionService is the VirtualMachineAdoption API (docs/adopt.md). An
// admin creates an adoption naming a node and a domain; the server labels
// it with that node (virtplane.io/node-name), the one node that may read
// it and write its status; the adoption controller makes the VM.
type adoptionService struct {
	apiv1.UnimplementedAdoptionsServer
	objects[*apiv1.VirtualMachineAdoption, *apiv1.ListAdoptionsResponse, apiv1.AdoptionEvent]
	s *Server
}

func newAdoptionService(s *Server) apiv1.AdoptionsServer {
	return &adoptionService{s: s, objects: objects[*apiv1.VirtualMachineAdoption, *apiv1.ListAdoptionsResponse, apiv1.AdoptionEvent]{
		st: s.stores.Adoptions, log: s.log, kind: apiv1.KindAdoption, noun: "adoption", attr: "adoption",
		listResponse: func(p store.Page[*apiv1.VirtualMachineAdoption]) *apiv1.ListAdoptionsResponse {
			return &apiv1.ListAdoptionsResponse{Items: p.Items, ResourceVersion: p.Revision, Continue: p.Continue}
		},
		event: func(t apiv1.EventType, o *apiv1.VirtualMachineAdoption, rev int64) *apiv1.AdoptionEvent {
			return &apiv1.AdoptionEvent{Type: t, Object: o, ResourceVersion: rev}
		},
	}}
}

// errNoAdoptions answers every call of a server built without the store
// (tests).
var errNoAdoptions = status.Error(codes.Unimplemented, "this server serves no adoptions")

func (v *adoptionService) Create(ctx context.Context, req *apiv1.CreateAdoptionRequest) (*apiv1.VirtualMachineAdoption, error) {
	if v.st == nil {
		return nil, errNoAdoptions
	}
	a := requestCopy(req.GetAdoption())
	validation.DefaultAdoption(a)
	if errs := validation.ValidateAdoption(a); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindAdoption, a.GetMetadata().GetName(), errs)
	}
	if !a.Spec.DryRun {
		// The adoption makes the VM of its name: refused at once when the
		// name is taken, rather than after the node looked. A VM made
		// under that name meanwhile fails the adoption in its controller.
		_, err := v.s.stores.VMs.Get(ctx, a.Metadata.Namespace, a.Metadata.Name)
		switch {
		case err == nil:
			return nil, status.Errorf(codes.AlreadyExists, "virtualmachine %q already exists: an adoption makes the VM of its own name", apiv1.Ref(a.Metadata.Namespace, a.Metadata.Name))
		case !errors.Is(err, store.ErrNotFound):
			return nil, toStatus(err)
		}
	}
	a.Metadata = userMeta(a.Metadata)
	// The node label is the server's, from the spec: it is what lets that
	// node, and no other, read and write the adoption.
	a.Metadata.Labels = maps.Clone(a.Metadata.Labels)
	if a.Metadata.Labels == nil {
		a.Metadata.Labels = map[string]string{}
	}
	a.Metadata.Labels[apiv1.LabelNodeName] = a.Spec.NodeName
	a.Status = &apiv1.VirtualMachineAdoptionStatus{Phase: apiv1.AdoptionPending}
	return v.create(ctx, a, "node", a.Spec.NodeName, "domain", a.Spec.DomainName, "dry_run", a.Spec.DryRun)
}

func (v *adoptionService) Get(ctx context.Context, req *apiv1.GetAdoptionRequest) (*apiv1.VirtualMachineAdoption, error) {
	if v.st == nil {
		return nil, errNoAdoptions
	}
	return v.get(ctx, req.GetKey())
}

func (v *adoptionService) List(ctx context.Context, req *apiv1.ListAdoptionsRequest) (*apiv1.ListAdoptionsResponse, error) {
	if v.st == nil {
		return nil, errNoAdoptions
	}
	return v.list(ctx, req.GetOptions())
}

func (v *adoptionService) Delete(ctx context.Context, req *apiv1.DeleteAdoptionRequest) (*apiv1.VirtualMachineAdoption, error) {
	if v.st == nil {
		return nil, errNoAdoptions
	}
	return v.delete(ctx, req.GetKey(), req.GetOptions())
}

func (v *adoptionService) Watch(req *apiv1.WatchAdoptionsRequest, stream apiv1.Adoptions_WatchServer) error {
	if v.st == nil {
		return errNoAdoptions
	}
	return v.watch(req.GetOptions(), stream)
}

// UpdateStatus writes the status. An admin (the controller writes the
// store itself) replaces it; the node labelled on the adoption reports
// only what a node finds, in the two steps a node takes: from Pending,
// the mapping (Mapped or Refused, with the spec, refusals, notes, the
// domain and its disks); from Adopting, the take-over (Adopted or Failed,
// the instance and QEMU's pid). The VM uid, the node label and every
// other step are the controller's.
func (v *adoptionService) UpdateStatus(ctx context.Context, req *apiv1.UpdateAdoptionStatusRequest) (*apiv1.VirtualMachineAdoption, error) {
	if v.st == nil {
		return nil, errNoAdoptions
	}
	in, cur, ref, err := v.statusRequest(ctx, req.GetAdoption())
	if err != nil {
		return nil, err
	}
	if errs := validation.ValidateAdoptionStatus(in.GetStatus(), field.NewPath("status")); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindAdoption, ref, errs)
	}
	next := proto.Clone(cur).(*apiv1.VirtualMachineAdoption)
	id := IdentityFrom(ctx)
	if id.Kind != Node {
		next.Status = in.GetStatus()
		return v.commitStatus(ctx, cur, next)
	}
	if err := nodeLabelled(id, apiv1.KindAdoption, ref, cur.GetMetadata()); err != nil {
		return nil, err
	}
	if err := setNodeAdoptionStatus(next, in.GetStatus()); err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "%s %q: %v", apiv1.KindAdoption, ref, err)
	}
	return v.commitStatus(ctx, cur, next)
}

// setNodeAdoptionStatus applies a node's report to next (the stored
// adoption): the fields of the step the adoption is at, and only those.
func setNodeAdoptionStatus(next *apiv1.VirtualMachineAdoption, in *apiv1.VirtualMachineAdoptionStatus) error {
	if next.Status == nil {
		next.Status = &apiv1.VirtualMachineAdoptionStatus{}
	}
	st := next.Status
	switch cur, to := st.GetPhase(), in.GetPhase(); {
	case (cur == "" || cur == apiv1.AdoptionPending) && (to == apiv1.AdoptionMapped || to == apiv1.AdoptionRefused):
		st.Phase, st.Spec, st.Refusals, st.Notes = to, in.GetSpec(), in.GetRefusals(), in.GetNotes()
		st.DomainUuid, st.DomainState, st.QemuPid, st.Disks = in.GetDomainUuid(), in.GetDomainState(), in.GetQemuPid(), in.GetDisks()
		st.Message = in.GetMessage()
	case cur == apiv1.AdoptionAdopting && (to == apiv1.AdoptionAdopted || to == apiv1.AdoptionFailed):
		st.Phase, st.VmiUid, st.QemuPid, st.Message = to, in.GetVmiUid(), in.GetQemuPid(), in.GetMessage()
	case cur == to:
		// The node's message while it works on the step (or a repeat).
		st.Message = in.GetMessage()
	default:
		return errors.New("a node may move an adoption from Pending to Mapped or Refused, and from Adopting to Adopted or Failed, not from " + phaseOrNone(cur) + " to " + phaseOrNone(to))
	}
	return nil
}

// checkServerOwnedAnnotations refuses a client's VM whose template sets or
// changes an annotation only the server writes (the adoption that made
// the VM: apiv1.ServerOwnedTemplateAnnotation) from old's (nil on
// create).
func checkServerOwnedAnnotations(vm, old *apiv1.VirtualMachine) error {
	want, had := vm.GetSpec().GetTemplate().GetMetadata().GetAnnotations(), old.GetSpec().GetTemplate().GetMetadata().GetAnnotations()
	var errs field.ErrorList
	p := field.NewPath("spec", "template", "metadata", "annotations")
	for _, m := range []map[string]string{want, had} {
		for k := range m {
			if apiv1.ServerOwnedTemplateAnnotation(k) && want[k] != had[k] {
				errs = append(errs, field.Forbidden(p.Key(k), "set by the server when an adoption makes the VM; it may not be set or changed"))
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return validation.ToStatusError(apiv1.KindVirtualMachine, vm.GetMetadata().GetName(), errs[:1])
}
