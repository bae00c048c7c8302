// Package eviction carries out what apiv1.Eviction decides for one
// instance: mark it for evacuation, or shut it down. The API's Evict call
// and the evacuation controller (a drain) both act through it, so that an
// instance leaves its node the same way whoever asked.
package eviction

import (
	"context"
	"fmt"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// VMIWriter is what an eviction writes: a compare-and-swap update of the
// version it decided on, and the deletion that shuts the guest down.
type VMIWriter interface {
	Update(ctx context.Context, vmi *apiv1.VirtualMachineInstance) (*apiv1.VirtualMachineInstance, error)
	Delete(ctx context.Context, namespace, name string, opts store.DeleteOptions) (*apiv1.VirtualMachineInstance, bool, error)
}

// Mark records that vmi is being evacuated from the node it runs on
// (status.evacuation_node_name); the evacuation controller migrates
// marked instances. Marking a marked instance writes nothing. The update
// is a compare-and-swap of vmi's version: store.ErrConflict means the
// decision was made on an old view.
func Mark(ctx context.Context, w VMIWriter, vmi *apiv1.VirtualMachineInstance) (*apiv1.VirtualMachineInstance, error) {
	node := vmi.GetStatus().GetNodeName()
	if node == "" {
		return nil, fmt.Errorf("instance %s is on no node yet", ref(vmi))
	}
	if vmi.GetStatus().GetEvacuationNodeName() == node {
		return vmi, nil
	}
	next := proto.Clone(vmi).(*apiv1.VirtualMachineInstance)
	next.Status.EvacuationNodeName = node
	out, err := w.Update(ctx, next)
	if err != nil {
		return nil, fmt.Errorf("marking %s for evacuation from %s: %w", ref(vmi), node, err)
	}
	return out, nil
}

// Unmark drops an evacuation mark (the instance left, or the drain was
// canceled). Compare-and-swap like Mark.
func Unmark(ctx context.Context, w VMIWriter, vmi *apiv1.VirtualMachineInstance) (*apiv1.VirtualMachineInstance, error) {
	if vmi.GetStatus().GetEvacuationNodeName() == "" {
		return vmi, nil
	}
	next := proto.Clone(vmi).(*apiv1.VirtualMachineInstance)
	next.Status.EvacuationNodeName = ""
	out, err := w.Update(ctx, next)
	if err != nil {
		return nil, fmt.Errorf("clearing the evacuation mark of %s: %w", ref(vmi), err)
	}
	return out, nil
}

// Shutdown shuts an instance down because it was evicted: it is annotated
// apiv1.AnnotationEvicted (so that its VM's run strategy treats the end
// as not the guest's) and deleted, which the node agent carries out with
// the instance's grace period. The annotation is a compare-and-swap of
// vmi's version; the deletion is bound to its uid.
func Shutdown(ctx context.Context, w VMIWriter, vmi *apiv1.VirtualMachineInstance) error {
	node := vmi.GetStatus().GetNodeName()
	if vmi.GetMetadata().GetAnnotations()[apiv1.AnnotationEvicted] != node {
		next := proto.Clone(vmi).(*apiv1.VirtualMachineInstance)
		if next.Metadata.Annotations == nil {
			next.Metadata.Annotations = map[string]string{}
		}
		next.Metadata.Annotations[apiv1.AnnotationEvicted] = node
		if _, err := w.Update(ctx, next); err != nil {
			return fmt.Errorf("annotating %s as evicted: %w", ref(vmi), err)
		}
	}
	if _, _, err := w.Delete(ctx, vmi.GetMetadata().GetNamespace(), vmi.GetMetadata().GetName(),
		store.DeleteOptions{UID: vmi.GetMetadata().GetUid()}); err != nil {
		return fmt.Errorf("shutting %s down: %w", ref(vmi), err)
	}
	return nil
}

// Evicted reports whether an eviction shut vmi down (Shutdown's mark).
func Evicted(vmi *apiv1.VirtualMachineInstance) bool {
	return vmi.GetMetadata().GetAnnotations()[apiv1.AnnotationEvicted] != ""
}

func ref(vmi *apiv1.VirtualMachineInstance) string {
	return apiv1.Ref(vmi.GetMetadata().GetNamespace(), vmi.GetMetadata().GetName())
}
