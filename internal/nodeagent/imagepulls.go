package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/client/remotestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/imagepull"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// ImageAPI is the image service as the node agent uses it: it watches
// Images and reports its pulls of them.
type ImageAPI interface {
	remotestore.ImageWatcher
	imagepull.API
}

// ReasonImagePullFailed is the VMI's reason while an image it needs could
// not be pulled; the agent keeps trying, as CDI retries an import.
const ReasonImagePullFailed = "ImagePullFailed"

// imagePulls is the agent's part of Images: the informer, the puller, and
// the queue of images to reconcile (eager pulls, removal of deleted
// Images' files).
type imagePulls struct {
	inf    *informer.Informer[*apiv1.Image]
	puller *imagepull.Puller
	queue  controller.Queue
}

// pullWorkers is how many images are reconciled at once: downloads are
// network-bound, and two keep one slow source from holding up the rest.
const pullWorkers = 2

func (a *Agent) newImagePulls() error {
	api := a.opts.API.Images
	if api == nil {
		return nil
	}
	st, err := imagestore.Open(a.opts.ImageDir)
	if err != nil {
		return err
	}
	p, err := imagepull.New(imagepull.Options{
		NodeName: a.opts.NodeName, Store: st, RecordDir: filepath.Join(a.opts.NodeDataDir, "pulled"), API: api,
		Clock: a.opts.Clock, Logger: a.log,
	})
	if err != nil {
		return err
	}
	ip := &imagePulls{
		inf:    informer.New[*apiv1.Image](remotestore.NewImages(api), store.ListOptions{}, a.log.With("informer", "image")),
		puller: p,
		queue:  controller.NewQueue("imagepull"),
	}
	enqueue := func(img *apiv1.Image) { ip.queue.Add(img.GetMetadata().GetName()) }
	ip.inf.AddHandler(informer.Handler[*apiv1.Image]{
		OnAdd:    enqueue,
		OnUpdate: func(_, img *apiv1.Image) { enqueue(img) },
		OnDelete: enqueue,
	})
	a.pulls = ip
	return nil
}

// runImagePulls runs the informer until it has synced, then the workers
// in the background; the returned func stops them.
func (a *Agent) runImagePulls(ctx context.Context) (stop func()) {
	ip := a.pulls
	if ip == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		go ip.inf.Run(ctx)
		select {
		case <-ip.inf.Synced():
		case <-ctx.Done():
			return
		}
		// Files of Images deleted while the agent was down.
		if recs, err := ip.puller.Records(); err == nil {
			for name := range recs {
				ip.queue.Add(name)
			}
		}
		controller.Run(ctx, "imagepull", ip.queue, pullWorkers, controller.ReconcileFunc(a.reconcileImage), a.log)
	}()
	return func() {
		cancel()
		ip.queue.ShutDown()
		<-done
		ip.puller.Close()
	}
}

// imagesSynced is closed once the agent knows the Images.
func (a *Agent) imagesSynced() <-chan struct{} {
	if a.pulls == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return a.pulls.inf.Synced()
}

// reconcileImage pulls an Image every node should have, and removes the
// file of an Image that is gone once no instance here uses it.
func (a *Agent) reconcileImage(ctx context.Context, name string) (controller.Result, error) {
	ip := a.pulls
	img, ok := ip.inf.Get("", name)
	if ok && img.GetSpec().GetNodes() == validation.ImageNodesAll {
		if err := ip.puller.Ensure(ctx, img, nil); err != nil {
			if ctx.Err() != nil {
				return controller.Result{}, nil
			}
			// Its own backoff, not the queue's: that one starts at
			// milliseconds, and a server that fails or a checksum that
			// does not match must not be fetched again at once.
			after := pullRetry(ip.puller.Attempts(name))
			a.log.Info("image pull failed; retrying later", "image", name, "retry_in", after, "err", err)
			return controller.Result{RequeueAfter: after}, nil
		}
		a.images.Refresh()
		return controller.Result{}, nil
	}
	if !ok {
		ip.puller.Discard(name)
	}
	recs, err := ip.puller.Records()
	if err != nil {
		return controller.Result{}, err
	}
	uid, pulled := recs[name]
	if !pulled || (ok && img.GetMetadata().GetUid() == uid) {
		return controller.Result{}, nil
	}
	if users := a.localImageUsers(name); len(users) > 0 {
		a.log.Info("keeping the image of a deleted Image while instances here use it", "image", name, "instances", users)
		return controller.Result{RequeueAfter: a.opts.Timing.ResyncPeriod}, nil
	}
	if err := ip.puller.Remove(ctx, name, uid); err != nil {
		return controller.Result{}, err
	}
	a.images.Refresh()
	return controller.Result{}, nil
}

// Backoff of failed eager pulls: 5 s doubling to 5 minutes.
const (
	pullRetryBase = 5 * time.Second
	pullRetryMax  = 5 * time.Minute
)

func pullRetry(attempts int32) time.Duration {
	d := pullRetryBase
	for i := int32(1); i < attempts && d < pullRetryMax; i++ {
		d *= 2
	}
	return min(d, pullRetryMax)
}

// localImageUsers lists the instances on this node that refer to image
// name.
func (a *Agent) localImageUsers(name string) []string {
	var users []string
	for _, v := range a.vmis.List() {
		if slices.Contains(validation.ImageRefs(v.GetSpec(), a.opts.ImageDir), name) {
			users = append(users, informer.Key(v))
		}
	}
	return users
}

// pullImages pulls the Images vmi needs that are not on the node yet,
// showing the pull on the VMI (condition Provisioning) while it waits.
// Images that are no Image object are the disk room's business.
func (a *Agent) pullImages(ctx context.Context, vmi *apiv1.VirtualMachineInstance) error {
	ip := a.pulls
	if ip == nil {
		return nil
	}
	for _, name := range validation.ImageRefs(vmi.GetSpec(), a.opts.ImageDir) {
		img, ok := ip.inf.Get("", name)
		if !ok || ip.puller.Have(img) {
			continue
		}
		show := func(msg string) {
			if _, err := a.writeStatus(ctx, vmi, provisioningStatus(msg)); err != nil && !errors.Is(err, errVMIGone) {
				a.log.Warn("showing the image pull failed", "vmi", informer.Key(vmi), "err", err)
			}
		}
		show(fmt.Sprintf("pulling image %s", name))
		err := ip.puller.Ensure(ctx, img, func(pr imagepull.Progress) {
			show(fmt.Sprintf("pulling image %s: %s", name, pr))
		})
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			return &disks.Error{Reason: ReasonImagePullFailed, Err: fmt.Errorf("pulling image %s: %w", name, err), Retry: true}
		}
		a.images.Refresh()
	}
	return nil
}

var _ ImageAPI = (apiv1.ImagesClient)(nil)
