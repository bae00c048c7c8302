package apiserver

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/macaddr"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// vmTemplateSpecPath is where a VM holds its instance spec.
var vmTemplateSpecPath = field.NewPath("spec", "template", "spec")

type vmService struct {
	apiv1.UnimplementedVirtualMachinesServer
	s *Server
}

// keyOf is the namespace and name a request names an object by, checked
// as stored objects' are (DNS-1123 labels), so that a name no object can
// have is InvalidArgument before it reaches the store.
func keyOf(k *apiv1.ObjectKey) (string, string, error) {
	ns, name := k.GetNamespace(), k.GetName()
	if ns == "" {
		ns = apiv1.DefaultNamespace
	}
	if errs := validation.ValidateObjectKey(ns, name, field.NewPath("key")); len(errs) > 0 {
		return "", "", validation.ToStatusError("ObjectKey", apiv1.Ref(ns, name), errs)
	}
	return ns, name, nil
}

// checkSelector refuses a label selector of a list or watch that is too
// large to match against every object (validation.ValidateLabelSelector).
func checkSelector(s string) error {
	return validation.ToStatusError("LabelSelector", "", validation.ValidateLabelSelector(s, field.NewPath("options", "label_selector")))
}

// getByKey is Get for a namespaced kind (VMs, instances): the key is
// checked before the store is asked.
func getByKey[T store.Object](ctx context.Context, st store.Store[T], key *apiv1.ObjectKey) (T, error) {
	ns, name, err := keyOf(key)
	if err != nil {
		var none T
		return none, err
	}
	out, err := st.Get(ctx, ns, name)
	return out, toStatus(err)
}

// listNamespaced is List for a namespaced kind: the selector is checked
// before the store is asked.
func listNamespaced[T store.Object](ctx context.Context, st store.Store[T], o *apiv1.ListOptions) ([]T, int64, error) {
	if err := checkSelector(o.GetLabelSelector()); err != nil {
		return nil, 0, err
	}
	items, rev, err := st.List(ctx, listOptions(o))
	return items, rev, toStatus(err)
}

func (v *vmService) Create(ctx context.Context, req *apiv1.CreateVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	vm := proto.Clone(req.GetVm()).(*apiv1.VirtualMachine)
	if vm == nil {
		vm = &apiv1.VirtualMachine{}
	}
	validation.DefaultVirtualMachine(vm)
	macaddr.Assign(vm.GetSpec().GetTemplate().GetSpec(), nil)
	if errs := validation.ValidateVirtualMachine(vm, v.s.opts.Validation); len(errs) > 0 {
		return nil, validation.ToStatusError("VirtualMachine", vm.GetMetadata().GetName(), errs)
	}
	if err := v.s.checkImageSizes(ctx, apiv1.KindVirtualMachine, vm.Metadata.Name, vmTemplateSpecPath, vm.Spec.Template.Spec, nil); err != nil {
		return nil, err
	}
	// The server owns these; a client cannot preset them.
	m := vm.Metadata
	vm.Metadata = &apiv1.ObjectMeta{
		Namespace: m.Namespace, Name: m.Name, Labels: m.Labels, Annotations: m.Annotations,
	}
	vm.Status = &apiv1.VirtualMachineStatus{}
	out, err := v.s.stores.VMs.Create(ctx, vm)
	if err != nil {
		return nil, toStatus(err)
	}
	v.s.log.Info("virtual machine created", "vm", m.Namespace+"/"+m.Name, "uid", out.Metadata.Uid)
	return out, nil
}

func (v *vmService) Get(ctx context.Context, req *apiv1.GetVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	return getByKey(ctx, v.s.stores.VMs, req.GetKey())
}

func (v *vmService) List(ctx context.Context, req *apiv1.ListVirtualMachinesRequest) (*apiv1.ListVirtualMachinesResponse, error) {
	items, rev, err := listNamespaced(ctx, v.s.stores.VMs, req.GetOptions())
	if err != nil {
		return nil, err
	}
	return &apiv1.ListVirtualMachinesResponse{Items: items, ResourceVersion: rev}, nil
}

// Update replaces spec, labels and annotations. The compare-and-swap on
// metadata.resource_version makes concurrent writers lose loudly instead of
// silently overwriting each other.
func (v *vmService) Update(ctx context.Context, req *apiv1.UpdateVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	in := proto.Clone(req.GetVm()).(*apiv1.VirtualMachine)
	if in == nil {
		in = &apiv1.VirtualMachine{}
	}
	validation.DefaultVirtualMachine(in)
	rv := in.GetMetadata().GetResourceVersion()
	if rv == 0 {
		return nil, status.Error(codes.InvalidArgument, "metadata.resource_version: Required value: an update must carry the version it read")
	}
	old, err := v.s.stores.VMs.Get(ctx, in.Metadata.Namespace, in.Metadata.Name)
	if err != nil {
		return nil, toStatus(err)
	}
	if in.Metadata.Uid == "" {
		in.Metadata.Uid = old.Metadata.Uid // not given: this object; a different uid is refused below
	}
	macaddr.Assign(in.GetSpec().GetTemplate().GetSpec(), old.GetSpec().GetTemplate().GetSpec())
	if errs := validation.ValidateVirtualMachine(in, v.s.opts.Validation); len(errs) > 0 {
		return nil, validation.ToStatusError("VirtualMachine", in.Metadata.Name, errs)
	}
	if errs := validation.ValidateVirtualMachineUpdate(in, old, v.s.opts.Validation); len(errs) > 0 {
		return nil, validation.ToStatusError("VirtualMachine", in.Metadata.Name, errs)
	}
	if err := v.s.checkImageSizes(ctx, apiv1.KindVirtualMachine, in.Metadata.Name, vmTemplateSpecPath, in.Spec.Template.Spec, old.GetSpec().GetTemplate().GetSpec()); err != nil {
		return nil, err
	}
	if old.Metadata.ResourceVersion != rv {
		return nil, status.Errorf(codes.Aborted, "virtualmachine %q: %s", in.Metadata.Namespace+"/"+in.Metadata.Name, conflictMessage)
	}
	next, changed := withUserChanges(old, in, !proto.Equal(old.Spec, in.Spec),
		func(n *apiv1.VirtualMachine) { n.Spec = in.Spec })
	if !changed {
		return old, nil
	}
	out, err := v.s.stores.VMs.Update(ctx, next)
	return out, toStatus(err)
}

func (v *vmService) Delete(ctx context.Context, req *apiv1.DeleteVirtualMachineRequest) (*apiv1.VirtualMachine, error) {
	out, err := deleteByKey(ctx, v.s.stores.VMs, apiv1.KindVirtualMachine, req.GetKey(), req.GetOptions())
	if err != nil {
		return nil, err
	}
	v.s.log.Info("virtual machine deletion requested", "vm", apiv1.Ref(out.GetMetadata().GetNamespace(), out.GetMetadata().GetName()))
	return out, nil
}

// deleteByKey is Delete for a namespaced kind that takes DeleteOptions
// (VMs, replica sets, pools): the key and the uid precondition are
// checked before the store is asked. An object with finalizers gets its
// deletion timestamp and stays until they are removed.
func deleteByKey[T store.Object](ctx context.Context, st store.Store[T], kind string, key *apiv1.ObjectKey, o *apiv1.DeleteOptions) (T, error) {
	var none T
	ns, name, err := keyOf(key)
	if err != nil {
		return none, err
	}
	if uid := o.GetUid(); uid != "" {
		if errs := validation.ValidateUID(uid, field.NewPath("options", "uid")); len(errs) > 0 {
			return none, validation.ToStatusError(kind, name, errs)
		}
	}
	out, _, err := st.Delete(ctx, ns, name, store.DeleteOptions{UID: o.GetUid(), ResourceVersion: o.GetResourceVersion()})
	if err != nil {
		return none, toStatus(err)
	}
	return out, nil
}

func (v *vmService) Watch(req *apiv1.WatchVirtualMachinesRequest, stream apiv1.VirtualMachines_WatchServer) error {
	return streamWatch(stream.Context(), v.s.stores.VMs, req.GetOptions(), func(t apiv1.EventType, o *apiv1.VirtualMachine, rev int64) error {
		return stream.Send(&apiv1.VirtualMachineEvent{Type: t, Object: o, ResourceVersion: rev})
	})
}

// Migrate creates a migration of the VM's instance (KubeVirt's
// `virtctl migrate`); the lifecycle verbs are in verbs.go.
func (v *vmService) Migrate(ctx context.Context, req *apiv1.MigrateVirtualMachineRequest) (*apiv1.VirtualMachineInstanceMigration, error) {
	return v.s.migrateVM(ctx, req)
}
