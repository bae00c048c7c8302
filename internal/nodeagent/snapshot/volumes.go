package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/storage"
)

// Classes is what snapshots need of the node's storage room: a class
// this node uses and reaches, or why not.
type Classes interface {
	Lookup(ctx context.Context, name string) (*storage.Class, error)
}

// volume is one persistent volume copied as a file: the live file, its
// copy, and the overlay an online snapshot puts over the live file. A
// local volume lives in the VM's directory and is copied into the
// node's snapshot directory; one on a shared filesystem class lives
// under the class's path and is copied there too (shared), where every
// node the class selects sees it.
type volume struct {
	name, live, copy, overlay string
	// class names a shared filesystem class; shared is its tree.
	class  string
	shared *nodedir.Layout
}

// rbdVolume is one persistent volume on an rbd class: its copy is an RBD
// snapshot of its image.
type rbdVolume struct {
	name  string
	class *storage.Class
}

// volumeSet is what a content copies.
type volumeSet struct {
	owner string // the source VM's uid (checked)
	files []volume
	rbds  []rbdVolume
	// unreachable says why classes could not be used, by volume.
	unreachable []error
}

func (s *volumeSet) empty() bool { return len(s.files) == 0 && len(s.rbds) == 0 }

// localLayout is node, the tree the set copies local volumes into, if it
// has any.
func (s *volumeSet) localLayout(node nodedir.Layout) []nodedir.Layout {
	for _, v := range s.files {
		if v.shared == nil {
			return []nodedir.Layout{node}
		}
	}
	return nil
}

// sharedLayouts are the shared classes' trees the set copies into.
func (s *volumeSet) sharedLayouts() []nodedir.Layout {
	var out []nodedir.Layout
	seen := map[string]bool{}
	for _, v := range s.files {
		if v.shared != nil && !seen[v.shared.Root] {
			seen[v.shared.Root] = true
			out = append(out, *v.shared)
		}
	}
	return out
}

// volumes lists the volumes of sc that exist: local ones on this node,
// those on classes where the class says; a volume never provisioned is
// skipped (the controller lists it as excluded). Every path is built
// from checked uids and names. A class the node cannot use is recorded
// in unreachable, not an error: undoing an attempt goes on without it.
func (c *Contents) volumes(ctx context.Context, sc *apiv1.VirtualMachineSnapshotContent) (*volumeSet, error) {
	layout := c.opts.Layout
	uid := sc.GetMetadata().GetUid()
	src := sc.GetSpec().GetSource()
	owner := src.GetMetadata().GetUid()
	if err := validation.CheckUID(owner); err != nil {
		return nil, fmt.Errorf("spec.source.metadata.uid: %w", err)
	}
	vmDir, err := layout.VMDir(owner)
	if err != nil {
		return nil, fmt.Errorf("spec.source.metadata.uid: %w", err)
	}
	// The content's own namespace, not the one its spec names: a content
	// copies only its namespace's VMs.
	if err := nodedir.CheckVMDirOwner(vmDir, sc.GetMetadata().GetNamespace(), src.GetMetadata().GetName()); err != nil {
		return nil, fmt.Errorf("spec.source: %w", err)
	}
	pvs := map[string]*apiv1.PersistentVolume{}
	for _, v := range src.GetSpec().GetTemplate().GetSpec().GetVolumes() {
		if pv := v.GetPersistent(); pv != nil {
			pvs[v.GetName()] = pv
		}
	}
	set := &volumeSet{owner: owner}
	for i, name := range sc.GetSpec().GetVolumes() {
		pv := pvs[name]
		if pv == nil || pv.IsLocal() {
			v, ok, err := fileVolume(layout, vmDir, uid, name, nil)
			if err != nil {
				return nil, fmt.Errorf("spec.volumes[%d]: %w", i, err)
			}
			if ok {
				set.files = append(set.files, v)
			}
			continue
		}
		class, err := c.lookup(ctx, pv.GetStorageClass())
		if err != nil {
			set.unreachable = append(set.unreachable, fmt.Errorf("volume %s: %w", name, err))
			continue
		}
		switch {
		case class.RBD() != nil:
			set.rbds = append(set.rbds, rbdVolume{name: name, class: class})
		case class.SharedPath() != "":
			lay := class.SharedLayout()
			dir, err := lay.VMDir(owner)
			if err != nil {
				return nil, fmt.Errorf("spec.volumes[%d]: %w", i, err)
			}
			if err := nodedir.CheckVMDirOwner(dir, sc.GetMetadata().GetNamespace(), src.GetMetadata().GetName()); err != nil {
				return nil, fmt.Errorf("spec.source: %w", err)
			}
			v, ok, err := fileVolume(lay, dir, uid, name, &lay)
			if err != nil {
				return nil, fmt.Errorf("spec.volumes[%d]: %w", i, err)
			}
			if ok {
				v.class = class.Name
				set.files = append(set.files, v)
			}
		default:
			set.unreachable = append(set.unreachable, fmt.Errorf("volume %s: storage class %s is of a kind this node does not know", name, class.Name))
		}
	}
	return set, nil
}

// fileVolume is volume name of the VM whose directory is vmDir in
// layout, copied for content uid; ok is false when it has neither a file
// nor an overlay (never provisioned).
func fileVolume(layout nodedir.Layout, vmDir, uid, name string, shared *nodedir.Layout) (volume, bool, error) {
	live, err := nodedir.FileIn(nodedir.VolumesDir(vmDir), name+".qcow2")
	if err != nil {
		return volume{}, false, err
	}
	cp, err := layout.SnapshotVolumePath(uid, name)
	if err != nil {
		return volume{}, false, err
	}
	v := volume{name: name, live: live, copy: cp, overlay: live + ".snap-" + uid, shared: shared}
	if _, err := os.Stat(live); errors.Is(err, os.ErrNotExist) {
		if _, oerr := os.Stat(v.overlay); oerr != nil {
			return volume{}, false, nil
		}
	} else if err != nil {
		return volume{}, false, err
	}
	return v, true, nil
}

// lookup finds a storage class this node uses.
func (c *Contents) lookup(ctx context.Context, name string) (*storage.Class, error) {
	if c.opts.Classes == nil {
		return nil, fmt.Errorf("storage class %s: this node has no storage classes", name)
	}
	return c.opts.Classes.Lookup(ctx, name)
}
