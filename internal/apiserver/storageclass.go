package apiserver

import (
	"context"
	"errors"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// storageClassService serves StorageClasses. A class's rbd key is stored
// with it and leaves the server only through Connect, to a node the class
// selects: every other read (Get, List, Watch, the answer to a write)
// carries status.key_set instead.
type storageClassService struct {
	apiv1.UnimplementedStorageClassesServer
	s *Server
}

func newStorageClassService(s *Server) apiv1.StorageClassesServer {
	return &storageClassService{s: s}
}

// withoutKey is sc as readers see it: no key, key_set saying whether one
// is stored.
func withoutKey(sc *apiv1.StorageClass) *apiv1.StorageClass {
	if sc == nil {
		return nil
	}
	out := proto.Clone(sc).(*apiv1.StorageClass)
	if out.Status == nil {
		out.Status = &apiv1.StorageClassStatus{}
	}
	out.Status.KeySet = out.GetSpec().GetRbd().GetKey() != ""
	if r := out.GetSpec().GetRbd(); r != nil {
		r.Key = ""
	}
	return out
}

func (c *storageClassService) store() (store.Store[*apiv1.StorageClass], error) {
	if c.s.stores.StorageClasses == nil {
		return nil, status.Error(codes.Unimplemented, "this server serves no storage classes")
	}
	return c.s.stores.StorageClasses, nil
}

func checkStorageClassName(name string) error {
	errs := validation.ValidateObjectMeta(&apiv1.ObjectMeta{Name: name}, false, field.NewPath("name"))
	return validation.ToStatusError(apiv1.KindStorageClass, name, errs)
}

func (c *storageClassService) Create(ctx context.Context, req *apiv1.CreateStorageClassRequest) (*apiv1.StorageClass, error) {
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	sc := requestCopy(req.GetStorageClass())
	validation.DiscardUnknown(sc)
	if errs := validation.ValidateStorageClass(sc, true); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindStorageClass, sc.GetMetadata().GetName(), errs)
	}
	m := sc.Metadata
	sc.Metadata = &apiv1.ObjectMeta{Name: m.Name, Labels: m.Labels, Annotations: m.Annotations}
	sc.Status = &apiv1.StorageClassStatus{}
	out, err := st.Create(ctx, sc)
	if err != nil {
		return nil, toStatus(err)
	}
	c.s.log.Info("storage class created", "class", m.Name, "kind", kindName(sc))
	return withoutKey(out), nil
}

func kindName(sc *apiv1.StorageClass) string {
	if sc.GetSpec().GetRbd() != nil {
		return "rbd"
	}
	return "shared_filesystem"
}

func (c *storageClassService) Get(ctx context.Context, req *apiv1.GetStorageClassRequest) (*apiv1.StorageClass, error) {
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	if err := checkStorageClassName(req.GetName()); err != nil {
		return nil, err
	}
	out, err := st.Get(ctx, "", req.GetName())
	return withoutKey(out), toStatus(err)
}

func (c *storageClassService) List(ctx context.Context, req *apiv1.ListStorageClassesRequest) (*apiv1.ListStorageClassesResponse, error) {
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	if err := checkSelector(req.GetLabelSelector()); err != nil {
		return nil, err
	}
	items, rev, err := st.List(ctx, store.ListOptions{LabelSelector: req.GetLabelSelector()})
	if err != nil {
		return nil, toStatus(err)
	}
	for i, sc := range items {
		items[i] = withoutKey(sc)
	}
	return &apiv1.ListStorageClassesResponse{Items: items, ResourceVersion: rev}, nil
}

// Update replaces labels, annotations and the spec; an empty rbd key keeps
// the stored one. Where volumes are (kind, pool, path) is immutable.
func (c *storageClassService) Update(ctx context.Context, req *apiv1.UpdateStorageClassRequest) (*apiv1.StorageClass, error) {
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	in := requestCopy(req.GetStorageClass())
	validation.DiscardUnknown(in)
	if in.GetMetadata().GetResourceVersion() == 0 {
		return nil, errNoResourceVersion
	}
	if errs := validation.ValidateStorageClass(in, false); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindStorageClass, in.GetMetadata().GetName(), errs)
	}
	old, err := st.Get(ctx, "", in.Metadata.Name)
	if err != nil {
		return nil, toStatus(err)
	}
	if r := in.GetSpec().GetRbd(); r != nil && r.Key == "" {
		r.Key = old.GetSpec().GetRbd().GetKey()
	}
	if errs := validation.ValidateStorageClassUpdate(in, old); len(errs) > 0 {
		return nil, validation.ToStatusError(apiv1.KindStorageClass, in.Metadata.Name, errs)
	}
	if stale(old, in.Metadata) {
		return nil, conflict(apiv1.KindStorageClass, in.Metadata.Name)
	}
	next, changed := withUserChanges(old, in, func(n *apiv1.StorageClass) bool { return replaceSpec(&n.Spec, in.Spec) })
	if !changed {
		return withoutKey(old), nil
	}
	out, err := st.Update(ctx, next)
	if err == nil {
		c.s.log.Info("storage class updated", "class", in.Metadata.Name)
	}
	return withoutKey(out), toStatus(err)
}

// Delete refuses while a VM or an instance has a volume of the class:
// their volumes would be left where nothing can reach them.
func (c *storageClassService) Delete(ctx context.Context, req *apiv1.DeleteStorageClassRequest) (*apiv1.StorageClass, error) {
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	name := req.GetName()
	if err := checkStorageClassName(name); err != nil {
		return nil, err
	}
	users, err := c.users(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(users) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "storage class %q is in use by %s: delete them first", name, strings.Join(users, ", "))
	}
	out, _, err := st.Delete(ctx, "", name, store.DeleteOptions{})
	if err != nil {
		return nil, toStatus(err)
	}
	c.s.log.Info("storage class deleted", "class", name)
	return withoutKey(out), nil
}

// users lists the VMs and instances (not those of a VM listed already)
// with a volume of class name.
func (c *storageClassService) users(ctx context.Context, name string) ([]string, error) {
	vms, _, err := c.s.stores.VMs.List(ctx, store.ListOptions{})
	if err != nil {
		return nil, toStatus(err)
	}
	var users []string
	for _, vm := range vms {
		if slices.Contains(validation.StorageClassRefs(vm.GetSpec().GetTemplate().GetSpec()), name) {
			users = append(users, "vm "+apiv1.Ref(vm.Metadata.Namespace, vm.Metadata.Name))
		}
	}
	vmis, _, err := c.s.stores.VMIs.List(ctx, store.ListOptions{})
	if err != nil {
		return nil, toStatus(err)
	}
	for _, vmi := range vmis {
		ref := "vm " + apiv1.Ref(vmi.Metadata.Namespace, vmi.Metadata.Name)
		if slices.Contains(users, ref) || !slices.Contains(validation.StorageClassRefs(vmi.GetSpec()), name) {
			continue
		}
		users = append(users, "instance "+apiv1.Ref(vmi.Metadata.Namespace, vmi.Metadata.Name))
	}
	if len(users) > maxUsersListed {
		users = append(users[:maxUsersListed:maxUsersListed], "…")
	}
	return users, nil
}

func (c *storageClassService) Watch(req *apiv1.WatchStorageClassesRequest, stream apiv1.StorageClasses_WatchServer) error {
	st, err := c.store()
	if err != nil {
		return err
	}
	return clusterWatch(stream.Context(), st, req.GetOptions(), func(t apiv1.EventType, obj *apiv1.StorageClass, rev int64) error {
		return stream.Send(&apiv1.StorageClassEvent{Type: t, Object: withoutKey(obj), ResourceVersion: rev})
	})
}

// Connect hands a class with its key to a node the class selects (by the
// labels the server holds for it, which a node cannot set beyond its own
// node.virtplane.io/ ones). Admins may call it too: they wrote the key.
func (c *storageClassService) Connect(ctx context.Context, req *apiv1.ConnectStorageClassRequest) (*apiv1.StorageClassConnection, error) {
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	name := req.GetName()
	if err := checkStorageClassName(name); err != nil {
		return nil, err
	}
	sc, err := st.Get(ctx, "", name)
	if err != nil {
		return nil, toStatus(err)
	}
	if id := IdentityFrom(ctx); id.Kind == Node {
		node, err := c.s.stores.Nodes.Get(ctx, "", id.Node)
		if err != nil {
			return nil, toStatus(err)
		}
		if !sc.SelectsNode(node.GetMetadata().GetLabels()) {
			return nil, status.Errorf(codes.PermissionDenied, "storage class %q does not select node %s (spec.node_selector)", name, id.Node)
		}
	}
	return &apiv1.StorageClassConnection{StorageClass: sc}, nil
}

// checkStorageClasses refuses persistent volumes on a storage class that
// does not exist, naming the field: an instance could never be placed.
// Specs with only local volumes cost no read.
func (s *Server) checkStorageClasses(ctx context.Context, kind, name string, path *field.Path, spec *apiv1.VirtualMachineInstanceSpec) error {
	refs := validation.StorageClassRefs(spec)
	if len(refs) == 0 {
		return nil
	}
	if s.stores.StorageClasses == nil {
		return status.Error(codes.Unimplemented, "this server serves no storage classes")
	}
	var errs field.ErrorList
	for i, v := range spec.GetVolumes() {
		pv := v.GetPersistent()
		if pv == nil || validation.UsesLocalStorage(pv) {
			continue
		}
		_, err := s.stores.StorageClasses.Get(ctx, "", pv.GetStorageClass())
		switch {
		case errors.Is(err, store.ErrNotFound):
			errs = append(errs, field.NotFound(path.Child("volumes").Index(i).Child("persistent", "storage_class"), pv.GetStorageClass()))
		case err != nil:
			return toStatus(err)
		}
	}
	return validation.ToStatusError(kind, name, errs)
}
