package apiserver

import (
	"context"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

type imageService struct {
	apiv1.UnimplementedImagesServer
	s *Server
}

func newImageService(s *Server) apiv1.ImagesServer { return &imageService{s: s} }

func checkImageName(name string) error {
	errs := validation.ValidateObjectMeta(&apiv1.ObjectMeta{Name: name}, false, field.NewPath("name"))
	return validation.ToStatusError("Image", name, errs)
}

func (i *imageService) Create(ctx context.Context, req *apiv1.CreateImageRequest) (*apiv1.Image, error) {
	img := requestCopy(req.GetImage())
	validation.DiscardUnknown(img)
	validation.DefaultImage(img)
	validation.DefaultImageMaxSize(img, i.s.opts.ImagePolicy.DefaultMaxSize)
	errs := validation.ValidateImage(img)
	if len(errs) == 0 {
		errs = validation.ValidateImageMaxSize(img, nil, i.s.opts.ImagePolicy.MaxSizeCap)
	}
	if len(errs) == 0 && img.GetSpec().GetUrl() == validation.ImageUploadURL {
		errs = field.ErrorList{field.Invalid(field.NewPath("spec", "url"), img.GetSpec().GetUrl(), "is made by `image upload` (ImageUploads.Begin), not by Create")}
	}
	if len(errs) > 0 {
		return nil, validation.ToStatusError("Image", img.GetMetadata().GetName(), errs)
	}
	m := img.Metadata
	img.Metadata = &apiv1.ObjectMeta{Name: m.Name, Labels: m.Labels, Annotations: m.Annotations}
	img.Status = &apiv1.ImageStatus{}
	out, err := i.s.stores.Images.Create(ctx, img)
	if err != nil {
		return nil, toStatus(err)
	}
	i.s.log.Info("image created", "image", m.Name, "url", validation.RedactURL(img.Spec.Url), "nodes", img.Spec.Nodes)
	return out, nil
}

func (i *imageService) Get(ctx context.Context, req *apiv1.GetImageRequest) (*apiv1.Image, error) {
	if err := checkImageName(req.GetName()); err != nil {
		return nil, err
	}
	out, err := i.s.stores.Images.Get(ctx, "", req.GetName())
	return out, toStatus(err)
}

func (i *imageService) List(ctx context.Context, req *apiv1.ListImagesRequest) (*apiv1.ListImagesResponse, error) {
	if err := checkSelector(req.GetLabelSelector()); err != nil {
		return nil, err
	}
	items, rev, err := i.s.stores.Images.List(ctx, store.ListOptions{LabelSelector: req.GetLabelSelector()})
	if err != nil {
		return nil, toStatus(err)
	}
	return &apiv1.ListImagesResponse{Items: items, ResourceVersion: rev}, nil
}

// Update replaces labels, annotations, spec.nodes and spec.max_size (unset
// keeps it); the source is
// immutable (validation.ValidateImageUpdate).
func (i *imageService) Update(ctx context.Context, req *apiv1.UpdateImageRequest) (*apiv1.Image, error) {
	in := requestCopy(req.GetImage())
	validation.DiscardUnknown(in)
	validation.DefaultImage(in)
	if in.GetMetadata().GetResourceVersion() == 0 {
		return nil, errNoResourceVersion
	}
	if errs := validation.ValidateImage(in); len(errs) > 0 {
		return nil, validation.ToStatusError("Image", in.GetMetadata().GetName(), errs)
	}
	old, err := i.s.stores.Images.Get(ctx, "", in.Metadata.Name)
	if err != nil {
		return nil, toStatus(err)
	}
	if in.Spec.MaxSize == "" {
		// Unset keeps what it was: the default it got is no user's
		// change.
		in.Spec.MaxSize = old.GetSpec().GetMaxSize()
	}
	errs := validation.ValidateImageUpdate(in, old)
	if len(errs) == 0 {
		errs = validation.ValidateImageMaxSize(in, old, i.s.opts.ImagePolicy.MaxSizeCap)
	}
	if len(errs) > 0 {
		return nil, validation.ToStatusError("Image", in.Metadata.Name, errs)
	}
	if stale(old, in.Metadata) {
		return nil, conflict(store.Images.Kind, in.Metadata.Name)
	}
	next, changed := withUserChanges(old, in, func(n *apiv1.Image) bool { return replaceSpec(&n.Spec, in.Spec) })
	if !changed {
		return old, nil
	}
	out, err := i.s.stores.Images.Update(ctx, next)
	return out, toStatus(err)
}

// Delete refuses while a VM or an instance refers to the image: an
// instance restarted after its node removed the file could not start,
// and a VM would point at nothing. Nodes remove their copies once the
// Image is gone (nodeagent's image puller).
func (i *imageService) Delete(ctx context.Context, req *apiv1.DeleteImageRequest) (*apiv1.Image, error) {
	name := req.GetName()
	if err := checkImageName(name); err != nil {
		return nil, err
	}
	if users, err := i.users(ctx, name); err != nil {
		return nil, err
	} else if len(users) > 0 {
		return nil, status.Errorf(codes.FailedPrecondition, "image %q is in use by %s: delete or change them first", name, strings.Join(users, ", "))
	}
	out, _, err := i.s.stores.Images.Delete(ctx, "", name, store.DeleteOptions{})
	if err != nil {
		return nil, toStatus(err)
	}
	i.s.log.Info("image deleted", "image", name)
	return out, nil
}

// maxUsersListed bounds the users a refused delete names.
const maxUsersListed = 5

// users lists the VMs and instances (not those of a VM listed already)
// that refer to image name.
func (i *imageService) users(ctx context.Context, name string) ([]string, error) {
	dir := i.s.opts.Validation.ImageDir
	vms, _, err := i.s.stores.VMs.List(ctx, store.ListOptions{})
	if err != nil {
		return nil, toStatus(err)
	}
	var users []string
	for _, vm := range vms {
		if slices.Contains(validation.ImageRefs(vm.GetSpec().GetTemplate().GetSpec(), dir, true), name) {
			users = append(users, "vm "+apiv1.Ref(vm.Metadata.Namespace, vm.Metadata.Name))
		}
	}
	vmis, _, err := i.s.stores.VMIs.List(ctx, store.ListOptions{})
	if err != nil {
		return nil, toStatus(err)
	}
	for _, vmi := range vmis {
		ref := "vm " + apiv1.Ref(vmi.Metadata.Namespace, vmi.Metadata.Name)
		if slices.Contains(users, ref) || !slices.Contains(validation.ImageRefs(vmi.GetSpec(), dir, true), name) {
			continue
		}
		users = append(users, "instance "+apiv1.Ref(vmi.Metadata.Namespace, vmi.Metadata.Name))
	}
	if len(users) > maxUsersListed {
		users = append(users[:maxUsersListed:maxUsersListed], "…")
	}
	return users, nil
}

func (i *imageService) Watch(req *apiv1.WatchImagesRequest, stream apiv1.Images_WatchServer) error {
	return clusterWatch(stream.Context(), i.s.stores.Images, req.GetOptions(), func(t apiv1.EventType, obj *apiv1.Image, rev int64) error {
		return stream.Send(&apiv1.ImageEvent{Type: t, Object: obj, ResourceVersion: rev})
	})
}

// UpdateNodeStatus replaces the caller's entry in status.nodes. Nodes
// write only their own entry; entries of other nodes are kept, so many
// nodes pulling at once only retry on conflicts, never overwrite each
// other.
func (i *imageService) UpdateNodeStatus(ctx context.Context, req *apiv1.UpdateImageNodeStatusRequest) (*apiv1.Image, error) {
	name := req.GetName()
	if err := checkImageName(name); err != nil {
		return nil, err
	}
	in, _ := proto.Clone(req.GetStatus()).(*apiv1.ImageNodeStatus)
	if errs := validation.ValidateImageNodeStatus(in, field.NewPath("status")); len(errs) > 0 {
		return nil, validation.ToStatusError("Image", name, errs)
	}
	if id := IdentityFrom(ctx); id.Kind == Node && in.Node != id.Node {
		return nil, status.Errorf(codes.PermissionDenied, "status.node: node %s may report only its own pull, not %q's", id.Node, in.Node)
	}
	in.LastUpdateTime = timestamppb.New(i.s.opts.Clock())
	out, err := i.s.stores.Images.GuaranteedUpdate(ctx, "", name, func(cur *apiv1.Image) (*apiv1.Image, error) {
		if in.ImageUid != "" && in.ImageUid != cur.GetMetadata().GetUid() {
			return nil, status.Errorf(codes.FailedPrecondition, "image %q was re-created (uid %s, not %s)", name, cur.GetMetadata().GetUid(), in.ImageUid)
		}
		in.ImageUid = cur.GetMetadata().GetUid()
		if cur.Status == nil {
			cur.Status = &apiv1.ImageStatus{}
		}
		cur.Status.Nodes = setImageNodeStatus(cur.Status.Nodes, in)
		return cur, nil
	})
	return out, toStatus(err)
}

// setImageNodeStatus puts st into entries in place of st.node's entry,
// keeping entries sorted by node.
func setImageNodeStatus(entries []*apiv1.ImageNodeStatus, st *apiv1.ImageNodeStatus) []*apiv1.ImageNodeStatus {
	idx, found := slices.BinarySearchFunc(entries, st.Node, func(e *apiv1.ImageNodeStatus, node string) int {
		return strings.Compare(e.GetNode(), node)
	})
	if found {
		entries[idx] = st
		return entries
	}
	return slices.Insert(entries, idx, st)
}
