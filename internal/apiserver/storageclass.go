package apiserver

import (
	"context"
	"errors"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// storageClassService serves StorageClasses. A class's rbd key is
// write-only (secretObjects): it leaves the server only through Connect,
// to a node the class selects.
type storageClassService struct {
	apiv1.UnimplementedStorageClassesServer
	s       *Server
	classes secretObjects[*apiv1.StorageClass]
}

func newStorageClassService(s *Server) apiv1.StorageClassesServer {
	return &storageClassService{s: s, classes: secretObjects[*apiv1.StorageClass]{
		st: s.stores.StorageClasses, s: s, log: s.log, kind: apiv1.KindStorageClass, noun: "storage class", attr: "class",
		secret: func(sc *apiv1.StorageClass) *string {
			if r := sc.GetSpec().GetRbd(); r != nil {
				return &r.Key
			}
			return nil
		},
		setKeySet: func(sc *apiv1.StorageClass, set bool) {
			if sc.Status == nil {
				sc.Status = &apiv1.StorageClassStatus{}
			}
			sc.Status.KeySet = set
		},
		newStatus:      func(sc *apiv1.StorageClass) { sc.Status = &apiv1.StorageClassStatus{} },
		specKind:       kindName,
		validate:       validation.ValidateStorageClass,
		validateUpdate: validation.ValidateStorageClassUpdate,
	}}
}

func (c *storageClassService) Create(ctx context.Context, req *apiv1.CreateStorageClassRequest) (*apiv1.StorageClass, error) {
	return c.classes.create(ctx, req.GetStorageClass())
}

func kindName(sc *apiv1.StorageClass) string {
	if sc.GetSpec().GetRbd() != nil {
		return "rbd"
	}
	return "shared_filesystem"
}

func (c *storageClassService) Get(ctx context.Context, req *apiv1.GetStorageClassRequest) (*apiv1.StorageClass, error) {
	return c.classes.get(ctx, req.GetName())
}

func (c *storageClassService) List(ctx context.Context, req *apiv1.ListStorageClassesRequest) (*apiv1.ListStorageClassesResponse, error) {
	items, rev, err := c.classes.list(ctx, req.GetLabelSelector())
	if err != nil {
		return nil, err
	}
	return &apiv1.ListStorageClassesResponse{Items: items, ResourceVersion: rev}, nil
}

// Update replaces labels, annotations and the spec; an empty rbd key keeps
// the stored one. Where volumes are (kind, pool, path) is immutable.
func (c *storageClassService) Update(ctx context.Context, req *apiv1.UpdateStorageClassRequest) (*apiv1.StorageClass, error) {
	return c.classes.update(ctx, req.GetStorageClass(), func(n, in *apiv1.StorageClass) bool { return replaceSpec(&n.Spec, in.Spec) })
}

// Delete refuses while a VM or an instance has a volume of the class:
// their volumes would be left where nothing can reach them.
func (c *storageClassService) Delete(ctx context.Context, req *apiv1.DeleteStorageClassRequest) (*apiv1.StorageClass, error) {
	return c.classes.delete(ctx, req.GetName(), c.users, "delete them first")
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
	return users, nil
}

func (c *storageClassService) Watch(req *apiv1.WatchStorageClassesRequest, stream apiv1.StorageClasses_WatchServer) error {
	return c.classes.watch(stream.Context(), req.GetOptions(), func(t apiv1.EventType, obj *apiv1.StorageClass, rev int64) error {
		return stream.Send(&apiv1.StorageClassEvent{Type: t, Object: obj, ResourceVersion: rev})
	})
}

// Connect hands a class with its key to a node the class selects. Admins
// may call it too: they wrote the key.
func (c *storageClassService) Connect(ctx context.Context, req *apiv1.ConnectStorageClassRequest) (*apiv1.StorageClassConnection, error) {
	sc, err := c.classes.connect(ctx, req.GetName(), nil)
	if err != nil {
		return nil, err
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
