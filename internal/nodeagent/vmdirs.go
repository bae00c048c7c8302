package nodeagent

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
)

// DefaultVMDirGCPeriod is how often the agent looks for the directories
// of deleted VMs (persistent volumes, kept console logs).
const DefaultVMDirGCPeriod = 10 * time.Second

// vmDirGCDelay is how long after an instance's cleanup the agent checks
// whether its VM is gone too: the VM controller drops the VM right after
// its last instance, so deleting a VM removes its volumes within seconds.
const vmDirGCDelay = time.Second

// kickVMDirGC asks the collector for a pass soon.
func (a *Agent) kickVMDirGC() {
	select {
	case a.gcKick <- struct{}{}:
	default:
	}
}

func (a *Agent) vmDirGCLoop(ctx context.Context) {
	t := a.opts.Clock.NewTicker(a.opts.Timing.VMDirGCPeriod)
	defer t.Stop()
	a.gcVMDirs(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		case <-a.gcKick:
			select {
			case <-ctx.Done():
				return
			case <-a.opts.Clock.After(vmDirGCDelay):
			}
		}
		a.gcVMDirs(ctx)
	}
}

// gcVMDirs removes the directories of VMs that no longer exist. It only
// ever deletes on the API's word: a VM that is NotFound, or whose name
// now belongs to a VM with another uid. Any other error keeps the data.
func (a *Agent) gcVMDirs(ctx context.Context) {
	inUse := map[string]bool{}
	recs, err := a.db.ListVMIs()
	if err != nil {
		a.log.Warn("listing state records", "err", err)
		return
	}
	for _, r := range recs {
		inUse[r.VMUID] = true
	}
	a.gcVMDirsIn(ctx, a.layout, inUse)
	// The VMs' directories on the shared filesystems the node mounts:
	// whichever node looks first removes a deleted VM's, by the same
	// rule (the API says the VM is gone).
	if a.storage != nil {
		for _, layout := range a.storage.SharedLayouts() {
			a.gcVMDirsIn(ctx, layout, inUse)
		}
	}
}

// gcVMDirsIn removes the directories of deleted VMs in layout, but for
// those of the VMs with an instance on this node (inUse).
func (a *Agent) gcVMDirsIn(ctx context.Context, layout nodedir.Layout, inUse map[string]bool) {
	root := layout.VMsDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			a.log.Warn("listing VM directories", "err", err)
		}
		return
	}
	for _, e := range entries {
		uid := e.Name()
		if !e.IsDir() || inUse[uid] {
			continue
		}
		dir, err := layout.VMDir(uid)
		if err != nil {
			a.log.Warn("not a VM directory; leaving it", "dir", filepath.Join(root, uid), "err", err)
			continue
		}
		m, err := nodedir.ReadVMMeta(dir)
		if err != nil || m.UID != uid {
			a.log.Warn("VM directory without a valid "+nodedir.VMMetaFile+"; leaving it", "dir", dir, "err", err)
			continue
		}
		if !a.vmGone(ctx, m) {
			continue
		}
		if err := layout.RemoveVMDir(uid); err != nil {
			a.log.Warn("removing the files of a deleted VM", "dir", dir, "err", err)
			continue
		}
		a.log.Info("deleted VM's volumes and logs removed", "vm", apiv1.Ref(m.Namespace, m.Name), "uid", uid)
	}
}

func (a *Agent) vmGone(ctx context.Context, m nodedir.VMMeta) bool {
	cctx, cancel := context.WithTimeout(ctx, a.opts.Timing.CallTimeout)
	defer cancel()
	vm, err := a.vms.Get(cctx, &apiv1.GetVirtualMachineRequest{Key: &apiv1.ObjectKey{Namespace: m.Namespace, Name: m.Name}})
	switch {
	case status.Code(err) == codes.NotFound:
		return true
	case err != nil:
		return false
	}
	return vm.GetMetadata().GetUid() != m.UID
}
