package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/client/remotestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
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
		FileRoots: a.opts.ImageSourceDirs, Clock: a.opts.Clock, Logger: a.log,
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
	done, informerDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(informerDone); ip.inf.Run(ctx) }()
	go func() {
		defer close(done)
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
		<-informerDone
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
		err := ip.puller.Ensure(ctx, img, nil)
		var retry *imagepull.RetryError
		switch {
		case err == nil:
			a.images.Refresh()
			return controller.Result{}, nil
		case errors.As(err, &retry):
			// The puller's backoff, not the queue's: that one starts at
			// milliseconds.
			after := retry.RetryAt.Sub(a.now())
			a.log.Info("image pull failed; retrying later", "image", name, "retry_in", after, "err", err)
			return controller.Result{RequeueAfter: max(after, time.Second)}, nil
		case ctx.Err() != nil:
			return controller.Result{}, nil
		default: // the attempt just failed: the next pass reads its backoff
			return controller.Result{RequeueAfter: time.Second}, nil
		}
	}
	if !ok {
		ip.puller.Discard(name)
	}
	uid, pulled := ip.puller.PulledFrom(name)
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

// localImageUsers lists the instances on this node that refer to image
// name.
func (a *Agent) localImageUsers(name string) []string {
	var users []string
	for _, v := range a.vmis.List() {
		if slices.Contains(validation.ImageRefs(v.GetSpec(), a.opts.ImageDir, true), name) {
			users = append(users, informer.Key(v))
		}
	}
	return users
}

// pullWait is returned by pullImages while an image the VMI needs is
// not here: the handler comes back after the delay, and shows cause when
// the last pull failed.
type pullWait struct {
	after time.Duration
	cause error
}

func (w *pullWait) Error() string {
	if w.cause != nil {
		return w.cause.Error()
	}
	return fmt.Sprintf("waiting %s for an image pull", w.after)
}

// pullImages starts pulls of the Images vmi needs that are not on the
// node yet and shows them on the VMI (condition Provisioning: bytes,
// rate, ETA). It never waits for a download: a worker held by a pull of
// gigabytes could not stop other guests meanwhile. While a pull runs it
// returns a *pullWait, and the handler comes back every report interval
// to refresh the progress and start the guest once the pull is done.
// Images that are no Image object are the disk room's business.
func (a *Agent) pullImages(ctx context.Context, vmi *apiv1.VirtualMachineInstance) error {
	ip := a.pulls
	// A running guest has its disks (an agent restarting re-syncs it
	// here); it must not wait for anything.
	if ip == nil || vmi.GetStatus().GetPhase() == apiv1.PhaseRunning {
		return nil
	}
	var waiting []string
	var failed error
	retryAt := time.Time{}
	for _, name := range validation.ImageRefs(vmi.GetSpec(), a.opts.ImageDir, true) {
		img, ok := ip.inf.Get("", name)
		if !ok {
			continue
		}
		st := ip.puller.Pull(img)
		switch {
		case st.Ready:
			continue
		case st.Err != nil:
			failed = fmt.Errorf("pulling image %s: %w", name, st.Err)
			if retryAt.IsZero() || st.RetryAt.Before(retryAt) {
				retryAt = st.RetryAt
			}
		default:
			waiting = append(waiting, fmt.Sprintf("pulling image %s: %s", name, st.Progress))
		}
	}
	switch {
	case failed != nil:
		return &pullWait{after: max(retryAt.Sub(a.now()), time.Second), cause: failed}
	case len(waiting) > 0:
		if _, err := a.writeStatus(ctx, vmi, provisioningStatus(strings.Join(waiting, "; "))); err != nil && !errors.Is(err, errVMIGone) {
			return err
		}
		return &pullWait{after: pullPollInterval}
	}
	return nil
}

// pullPollInterval is how often a VMI waiting for a pull is looked at.
const pullPollInterval = 2 * time.Second

// pullWaiting handles a *pullWait from syncOptions.
func (a *Agent) pullWaiting(ctx context.Context, vmi *apiv1.VirtualMachineInstance, w *pullWait) (controller.Result, error) {
	if w.cause != nil {
		a.log.Warn("image pull failed; the VMI waits", "vmi", informer.Key(vmi), "err", w.cause, "retry_in", w.after)
		if _, err := a.writeStatus(ctx, vmi, syncFailedStatus(ReasonImagePullFailed, w.cause.Error()+" (retrying)", false)); err != nil && !errors.Is(err, errVMIGone) {
			return controller.Result{}, err
		}
	}
	return controller.Result{RequeueAfter: w.after}, nil
}

var _ ImageAPI = (apiv1.ImagesClient)(nil)
