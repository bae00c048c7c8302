package imagepull

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/client/remotestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/controller"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// The node agent's part of Images: a Controller watches them, pulls the
// Images every node should have at once, pulls the others when an
// instance placed here needs them (PullFor), and removes the file of an
// Image that is gone once no instance here uses it.

// WatchAPI is the image service as the controller uses it: it watches
// Images and reports its pulls of them.
type WatchAPI interface {
	remotestore.ImageWatcher
	API
}

// Inventory is the node's image list, listed again when a pull adds or
// removes a file.
type Inventory interface {
	Refresh()
}

// Instances are the VMIs placed on this node, as cached.
type Instances interface {
	List() []*apiv1.VirtualMachineInstance
}

// Reporter shows a pull under way on the instance that waits for it.
type Reporter interface {
	Provisioning(ctx context.Context, vmi *apiv1.VirtualMachineInstance, msg string) error
}

// ControllerOptions configure a Controller.
type ControllerOptions struct {
	NodeName string
	API      WatchAPI
	// ImageDir is the node's image directory; NodeDataDir holds the pull
	// records (<NodeDataDir>/pulled).
	ImageDir, NodeDataDir string
	// FileRoots are the directories file:// URLs may name.
	FileRoots []string
	// Uploads serves uploaded images; nil pulls none.
	Uploads Uploads
	// Policy is the server's image policy as the node last received it.
	Policy *imagepolicy.Current

	Inventory Inventory
	Instances Instances
	Reporter  Reporter
	// ResyncPeriod is how often the file of a deleted Image that an
	// instance still uses is looked at again.
	ResyncPeriod time.Duration
	Clock        clock.WithTicker
	Logger       *slog.Logger
}

// Controller is the informer, the puller, and the queue of images to
// reconcile (eager pulls, removal of deleted Images' files).
type Controller struct {
	opts   ControllerOptions
	log    *slog.Logger
	inf    *informer.Informer[*apiv1.Image]
	puller *Puller
	queue  controller.Queue
}

// workers is how many images are reconciled at once: downloads are
// network-bound, and two keep one slow source from holding up the rest.
const workers = 2

// NewController opens the image store and returns the controller; Run
// starts it.
func NewController(opts ControllerOptions) (*Controller, error) {
	st, err := imagestore.Open(opts.ImageDir)
	if err != nil {
		return nil, err
	}
	p, err := New(Options{
		NodeName: opts.NodeName, Store: st, RecordDir: filepath.Join(opts.NodeDataDir, "pulled"), API: opts.API,
		FileRoots: opts.FileRoots, Uploads: opts.Uploads, Policy: opts.Policy, Clock: opts.Clock, Logger: opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	c := &Controller{
		opts:   opts,
		log:    opts.Logger,
		inf:    informer.New[*apiv1.Image](remotestore.NewImages(opts.API), store.ListOptions{}, opts.Logger.With("informer", "image")),
		puller: p,
		queue:  controller.NewQueue("imagepull"),
	}
	enqueue := func(img *apiv1.Image) { c.queue.Add(img.GetMetadata().GetName()) }
	c.inf.AddHandler(informer.Handler[*apiv1.Image]{
		OnAdd:    enqueue,
		OnUpdate: func(_, img *apiv1.Image) { enqueue(img) },
		OnDelete: enqueue,
	})
	return c, nil
}

// Synced is closed once the controller knows the Images.
func (c *Controller) Synced() <-chan struct{} { return c.inf.Synced() }

// Run runs the informer until it has synced, then the workers in the
// background; the returned func stops them.
func (c *Controller) Run(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done, informerDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(informerDone); c.inf.Run(ctx) }()
	go func() {
		defer close(done)
		select {
		case <-c.inf.Synced():
		case <-ctx.Done():
			return
		}
		// Files of Images deleted while the agent was down.
		if recs, err := c.puller.Records(); err == nil {
			for name := range recs {
				c.queue.Add(name)
			}
		}
		controller.Run(ctx, "imagepull", c.queue, workers, controller.ReconcileFunc(c.Reconcile), c.log)
	}()
	return func() {
		cancel()
		c.queue.ShutDown()
		<-done
		<-informerDone
		c.puller.Close()
	}
}

// Reconcile pulls an Image every node should have, and removes the file
// of an Image that is gone once no instance here uses it.
func (c *Controller) Reconcile(ctx context.Context, name string) (controller.Result, error) {
	img, ok := c.inf.Get("", name)
	if ok && img.GetSpec().GetNodes() == validation.ImageNodesAll {
		err := c.puller.Ensure(ctx, img, nil)
		var retry *RetryError
		var perm *PermanentError
		switch {
		case err == nil:
			c.opts.Inventory.Refresh()
			return controller.Result{}, nil
		case errors.As(err, &perm):
			// An update of the Image comes through the informer; a new
			// policy is looked for now and then.
			c.log.Info("image pull refused for good", "image", name, "err", err)
			return controller.Result{RequeueAfter: RetryMax}, nil
		case errors.As(err, &retry):
			// The puller's backoff, not the queue's: that one starts at
			// milliseconds.
			after := retry.RetryAt.Sub(c.opts.Clock.Now())
			c.log.Info("image pull failed; retrying later", "image", name, "retry_in", after, "err", err)
			return controller.Result{RequeueAfter: max(after, time.Second)}, nil
		case ctx.Err() != nil:
			return controller.Result{}, nil
		default: // the attempt just failed: the next pass reads its backoff
			return controller.Result{RequeueAfter: time.Second}, nil
		}
	}
	if !ok {
		c.puller.Discard(name)
	}
	uid, pulled := c.puller.PulledFrom(name)
	if !pulled || (ok && img.GetMetadata().GetUid() == uid) {
		return controller.Result{}, nil
	}
	if users := c.localUsers(name); len(users) > 0 {
		c.log.Info("keeping the image of a deleted Image while instances here use it", "image", name, "instances", users)
		return controller.Result{RequeueAfter: c.opts.ResyncPeriod}, nil
	}
	if err := c.puller.Remove(ctx, name, uid); err != nil {
		return controller.Result{}, err
	}
	c.opts.Inventory.Refresh()
	return controller.Result{}, nil
}

// localUsers lists the instances on this node that refer to image name.
func (c *Controller) localUsers(name string) []string {
	var users []string
	for _, v := range c.opts.Instances.List() {
		if slices.Contains(validation.ImageRefs(v.GetSpec(), c.opts.ImageDir, true), name) {
			users = append(users, informer.Key(v))
		}
	}
	return users
}

// Wait is returned by PullFor while an image the VMI needs is not here:
// the handler comes back After, and shows Cause when the last pull
// failed; Cause wraps a *PermanentError when that pull went past its
// bounds, which is not tried again while they stay.
type Wait struct {
	After time.Duration
	Cause error
}

func (w *Wait) Error() string {
	if w.Cause != nil {
		return w.Cause.Error()
	}
	return fmt.Sprintf("waiting %s for an image pull", w.After)
}

// PollInterval is how often a VMI waiting for a pull is looked at.
const PollInterval = 2 * time.Second

// PullFor starts pulls of the Images vmi needs that are not on the node
// yet and shows them on the VMI (condition Provisioning: bytes, rate,
// ETA). It never waits for a download: a worker held by a pull of
// gigabytes could not stop other guests meanwhile. While a pull runs it
// returns a *Wait, and the handler comes back every report interval to
// refresh the progress and start the guest once the pull is done. Images
// that are no Image object are the disk room's business.
func (c *Controller) PullFor(ctx context.Context, vmi *apiv1.VirtualMachineInstance) error {
	// A running guest has its disks (an agent restarting re-syncs it
	// here); it must not wait for anything.
	if vmi.GetStatus().GetPhase() == apiv1.PhaseRunning {
		return nil
	}
	var waiting []string
	var failed error
	retryAt := time.Time{}
	for _, name := range validation.ImageRefs(vmi.GetSpec(), c.opts.ImageDir, true) {
		img, ok := c.inf.Get("", name)
		if !ok {
			continue
		}
		st := c.puller.Pull(img)
		if permanent(st.Err) {
			// Looked at again now and then: the Image's bounds may change.
			st.RetryAt = c.opts.Clock.Now().Add(RetryMax)
		}
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
		return &Wait{After: max(retryAt.Sub(c.opts.Clock.Now()), time.Second), Cause: failed}
	case len(waiting) > 0:
		if err := c.opts.Reporter.Provisioning(ctx, vmi, strings.Join(waiting, "; ")); err != nil {
			return err
		}
		return &Wait{After: PollInterval}
	}
	return nil
}
