package apiserver

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// checkVolumes checks what a spec's persistent volumes refer to in the
// store: their storage classes (checkStorageClasses) and images
// (checkImageSizes).
func (s *Server) checkVolumes(ctx context.Context, kind, name string, path *field.Path, spec, old *apiv1.VirtualMachineInstanceSpec) error {
	if err := s.checkStorageClasses(ctx, kind, name, path, spec); err != nil {
		return err
	}
	return s.checkImageSizes(ctx, kind, name, path, spec, old)
}

// checkImageSizes refuses persistent volumes smaller than the image they
// are copied from, as the nodes' image lists report it. The nodes are read
// only for a spec that has such a volume new or changed, so other creates
// and updates cost no extra read. old is nil on create. kind and name name
// the object in the error, path the instance spec in it
// (spec.template.spec of a VM).
func (s *Server) checkImageSizes(ctx context.Context, kind, name string, path *field.Path, spec, old *apiv1.VirtualMachineInstanceSpec) error {
	dir := s.opts.Validation.ImageDir
	if !validation.NeedsImageSizes(spec, old, dir) {
		return nil
	}
	nodes, _, err := s.stores.Nodes.List(ctx, store.ListOptions{})
	if err != nil {
		return toStatus(err)
	}
	sizes := validation.NodeImageSizes(nodes)
	// Images pulled by some node count too: another node may pull it.
	if s.stores.Images != nil {
		imgs, _, err := s.stores.Images.List(ctx, store.ListOptions{})
		if err != nil {
			return toStatus(err)
		}
		for _, img := range imgs {
			for _, e := range img.GetStatus().GetNodes() {
				if name := img.GetMetadata().GetName(); e.GetVirtualSizeBytes() > sizes[name] {
					sizes[name] = e.GetVirtualSizeBytes()
				}
			}
		}
	}
	errs := validation.ValidatePersistentImageSizes(spec, old, path, sizes, dir)
	return validation.ToStatusError(kind, name, errs)
}
