package nodeagent

import (
	"fmt"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagestore"
)

// The node's part of the server's image policy (imagepolicy): it comes
// with every heartbeat's answer, and the image puller reads it for each
// pull. Until the first one the node pulls nothing (a server that sends
// none is older than the policy); an invalid one is not taken.

// takeImagePolicy keeps the policy a heartbeat answer carried; the same
// one as the last beat's costs a comparison (imagepolicy.Current.Take).
func (a *Agent) takeImagePolicy(m *apiv1.ImagePullPolicy) {
	if m == nil {
		return
	}
	p, changed, err := a.imagePolicy.Take(m)
	switch {
	case err != nil:
		a.log.Warn("the server's image download policy is invalid; keeping the last one", "err", err)
	case changed:
		a.log.Info("image download policy", "source_cidrs", m.GetSourceCidrs(), "default_max_size", imagepolicy.Bytes(p.DefaultMaxSize),
			"max_size_cap", imagepolicy.Bytes(p.MaxSizeCap), "max_virtual_size", imagepolicy.Bytes(p.MaxVirtualSize),
			"timeout", p.Timeout, "min_speed", imagepolicy.Bytes(p.MinSpeed), "min_speed_time", p.MinSpeedTime)
	}
}

// maxVirtualSize is the largest virtual size of an image a persistent
// volume may be copied from: the server's cap, else the default one.
func (a *Agent) maxVirtualSize() int64 {
	if p, ok := a.imagePolicy.Get(); ok {
		return p.MaxVirtualSize
	}
	return imagepolicy.Default().MaxVirtualSize
}

// shareImages makes QEMU's group the image directory's and its images'
// (imagestore.Store.ShareWith), so that images are readable by QEMU and
// by no other user. gids are QEMU's groups (qemuUsers): none when guests
// are not QEMU processes here. With several, or root's, the images stay
// root's alone and QEMU reads them through libvirt's relabelling.
func (a *Agent) shareImages(gids []uint32) error {
	if len(gids) != 1 || gids[0] == 0 {
		if len(gids) > 1 {
			a.log.Warn("QEMU runs under several groups; images stay readable by root only, and libvirt relabels them for QEMU", "gids", gids)
		}
		return nil
	}
	st, err := imagestore.Open(a.opts.ImageDir)
	if err != nil {
		return err
	}
	if err := st.ShareWith(int(gids[0])); err != nil {
		return fmt.Errorf("giving the image directory QEMU's group: %w", err)
	}
	return nil
}
