// Package imagepull downloads Images (API objects) into the node's image
// directory: KubeVirt CDI's HTTP import, done by the node agent itself.
//
// A pull downloads next to the image (imagestore.DownloadPath), resuming
// what an earlier attempt left when the server supports ranges, then has
// the image store verify it (checksum, qemu-img) and rename it into place,
// so an image is complete and verified or absent. It is held to the
// server's policy (imagepolicy, received with heartbeats; none, no pull):
// it connects only where the policy allows, at every hop, stops at the
// Image's max_size, the policy's deadline and minimum speed, and keeps no
// image whose virtual size is above the policy's cap (bounds.go). Status
// messages say what the node knows, never what a server sent
// (describe). Concurrent Ensure calls
// for one image share one download. Each pull reports its progress
// (bytes, rate, ETA) in the Image's status entry for this node, and a
// record per image (<RecordDir>/<name>.json) remembers which Image (uid)
// the file came from, so a re-created Image of the same name is pulled
// again and a deleted one's file can be removed.
//
// Controller is the node agent's part of Images (controller.go): it
// watches them and decides what to pull and what to remove.
package imagepull

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/fsutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagepolicy"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagestore"
	"github.com/virtplane/terraform-provider-virtplane/internal/imagewait"
)

// API is the image service as the puller uses it.
type API interface {
	UpdateNodeStatus(ctx context.Context, in *apiv1.UpdateImageNodeStatusRequest, opts ...grpc.CallOption) (*apiv1.Image, error)
}

// Options configure a Puller.
type Options struct {
	NodeName string
	// Store is the node's image directory; required.
	Store *imagestore.Store
	// RecordDir keeps one record per pulled image; required.
	RecordDir string
	// API takes status reports; required.
	API API
	// Policy is the server's image policy as the node last received it;
	// required. Nothing is pulled while it has none.
	Policy *imagepolicy.Current
	// HTTPClient downloads; nil uses imagepolicy.NewClient(nil), which
	// connects only where the policy of each pull allows.
	HTTPClient *http.Client
	// FileRoots are the directories file:// sources may come from; none
	// refuses file:// sources.
	FileRoots []string
	// Uploads serves uploaded images (url "upload:"); nil pulls none.
	Uploads Uploads
	// ReportInterval is how often progress is reported while pulling;
	// default 2 s.
	ReportInterval time.Duration
	Clock          clock.WithTicker
	Logger         *slog.Logger
}

// Progress is how far a pull is.
type Progress struct {
	Done, Total int64 // bytes; Total 0 when unknown
	Rate        int64 // bytes per second
	ETA         time.Duration
}

// String renders p as the node's status entry shows it elsewhere ("40%
// of 1.0 GiB, 2.0 MiB/s, 30s left"): one rendering for the agent's
// messages, the CLI and the provider.
func (p Progress) String() string {
	return imagewait.Progress(&apiv1.ImageNodeStatus{
		BytesDone: p.Done, BytesTotal: p.Total, BytesPerSecond: p.Rate,
		EtaSeconds: int64(p.ETA.Round(time.Second) / time.Second),
	})
}

// Puller pulls images for one node.
type Puller struct {
	opts   Options
	log    *slog.Logger
	ctx    context.Context // pulls run on it, not on their callers'
	cancel context.CancelFunc

	mu       sync.Mutex
	pulls    map[string]*pull   // in flight, by image name
	attempts map[string]int32   // failed attempts since the last success
	failed   map[string]failure // the last failed attempt, by name
	wg       sync.WaitGroup
}

// New returns a Puller; Close stops its pulls.
func New(opts Options) (*Puller, error) {
	if opts.Store == nil || opts.API == nil || opts.RecordDir == "" || opts.NodeName == "" || opts.Policy == nil {
		return nil, errors.New("imagepull: Store, API, RecordDir, NodeName and Policy are required")
	}
	if opts.HTTPClient == nil {
		opts.HTTPClient = imagepolicy.NewClient(nil)
	}
	if opts.ReportInterval <= 0 {
		opts.ReportInterval = 2 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if _, err := fsutil.MkdirAll(opts.RecordDir, 0o700); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Puller{opts: opts, log: opts.Logger.With("component", "imagepull"), ctx: ctx, cancel: cancel,
		pulls: map[string]*pull{}, attempts: map[string]int32{}, failed: map[string]failure{}}, nil
}

// Close cancels the pulls under way (their downloads stay for a resume)
// and waits for them.
func (p *Puller) Close() {
	p.cancel()
	p.wg.Wait()
}

// record is what a pulled image's record holds.
type record struct {
	ImageUID string `json:"imageUID"`
	URL      string `json:"url"`
	SHA256   string `json:"sha256"`
}

func (p *Puller) recordPath(name string) (string, error) {
	if err := imagestore.ValidateName(name); err != nil || strings.Contains(name, "/") {
		return "", fmt.Errorf("image name %q: not an Image name", name)
	}
	return filepath.Join(p.opts.RecordDir, name+".json"), nil
}

func (p *Puller) readRecord(name string) (record, bool) {
	path, err := p.recordPath(name)
	if err != nil {
		return record{}, false
	}
	var r record
	return r, readJSON(path, &r)
}

// PulledFrom returns the uid of the Image that image name was pulled for;
// ok is false when it was not pulled (imported by hand, or absent).
func (p *Puller) PulledFrom(name string) (uid string, ok bool) {
	r, ok := p.readRecord(name)
	return r.ImageUID, ok
}

// Have says whether img is on the node: pulled for this Image (its uid)
// and still there.
func (p *Puller) Have(img *apiv1.Image) bool {
	name := img.GetMetadata().GetName()
	r, ok := p.readRecord(name)
	if !ok || r.ImageUID != img.GetMetadata().GetUid() {
		return false
	}
	path, err := p.opts.Store.Path(name)
	if err != nil {
		return false
	}
	_, err = os.Stat(path)
	return err == nil
}

// Records returns the uid of the Image each pulled image came from, by
// name.
func (p *Puller) Records() (map[string]string, error) {
	ents, err := os.ReadDir(p.opts.RecordDir)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() {
			continue
		}
		if r, ok := p.readRecord(name); ok {
			out[name] = r.ImageUID
		}
	}
	return out, nil
}

// Remove deletes the image pulled for Image uid, and its record; an image
// of that name from another Image, or imported by hand, is kept.
func (p *Puller) Remove(ctx context.Context, name, uid string) error {
	r, ok := p.readRecord(name)
	if !ok || r.ImageUID != uid {
		return nil
	}
	p.mu.Lock()
	_, pulling := p.pulls[name]
	p.mu.Unlock()
	if pulling {
		return nil // a new Image of that name is being pulled
	}
	if err := p.opts.Store.Remove(ctx, name); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	path, _ := p.recordPath(name)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	p.log.Info("removed the image of a deleted Image", "image", name, "uid", uid)
	return nil
}

// Discard removes what a pull of image name left (a download kept for a
// resume) unless one is under way: its Image is gone.
func (p *Puller) Discard(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, pulling := p.pulls[name]; pulling {
		return
	}
	delete(p.attempts, name)
	delete(p.failed, name)
	if dl, err := p.opts.Store.DownloadPath(name); err == nil {
		discard(dl)
	}
}

// Attempts is how many pulls of image name failed since the last success.
func (p *Puller) Attempts(name string) int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.attempts[name]
}

// Backoff between failed attempts to pull one image: RetryBase doubling
// to RetryMax, so a server that fails or a checksum that does not match
// is not fetched again at once, by any caller.
const (
	RetryBase = 5 * time.Second
	RetryMax  = 5 * time.Minute
)

func retryDelay(attempts int32) time.Duration {
	d := RetryBase
	for i := int32(1); i < attempts && d < RetryMax; i++ {
		d *= 2
	}
	return min(d, RetryMax)
}

// State is where an image stands on the node.
type State struct {
	// Ready: the image is here.
	Ready bool
	// Done is closed when the pull under way ends; nil when none is.
	Done     <-chan struct{}
	Progress Progress
	// Err is why the last attempt failed, while the backoff holds the
	// next one off until RetryAt; a *PermanentError with no RetryAt when
	// it went past a bound (max_size, deadline, virtual size): no attempt
	// follows until the bounds change.
	Err     error
	RetryAt time.Time
}

// Pull starts pulling img unless it is here, being pulled (then the pull
// is shared), or its last attempt failed less than the backoff ago. It
// never waits.
func (p *Puller) Pull(img *apiv1.Image) State {
	if p.Have(img) {
		return State{Ready: true}
	}
	name := img.GetMetadata().GetName()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.ctx.Err(); err != nil {
		// Closed: no new pull may start (Close is waiting for them).
		return State{Err: fmt.Errorf("image puller stopped: %w", err)}
	}
	if pl, ok := p.pulls[name]; ok {
		// Shared; or, for an Image re-created under the same name, the
		// old pull ends before the new one starts (one download file).
		return State{Done: pl.done, Progress: pl.progress()}
	}
	pol, ok := p.opts.Policy.Get()
	if !ok {
		// Never a looser policy than the server's: none, no pull.
		return State{Err: errNoPolicy, RetryAt: p.opts.Clock.Now().Add(policyWait)}
	}
	if f, ok := p.failed[name]; ok && f.uid == img.GetMetadata().GetUid() {
		switch {
		case permanent(f.err) && f.bounds == boundsOf(pol, img.GetSpec()):
			return State{Err: f.err}
		case permanent(f.err): // the bounds changed: one more attempt
		default:
			if at := f.at.Add(retryDelay(p.attempts[name])); p.opts.Clock.Now().Before(at) {
				return State{Err: f.err, RetryAt: at}
			}
		}
	}
	pl := p.startLocked(img, pol)
	return State{Done: pl.done}
}

// errNoPolicy: the node has not received the server's image policy.
var errNoPolicy = errors.New("waiting for the server's image download policy (it comes with the node's heartbeats)")

// policyWait is how long a pull waits for the policy before it asks again.
const policyWait = 2 * time.Second

// Ensure returns once img is on the node, pulling it unless it is there
// already; a pull under way for it is joined, not repeated. It returns
// the last error at once while the backoff holds a new attempt off.
// watch, when set, sees the progress every report interval while Ensure
// waits. When ctx ends Ensure returns but the pull goes on: others may
// want it.
func (p *Puller) Ensure(ctx context.Context, img *apiv1.Image, watch func(Progress)) error {
	t := p.opts.Clock.NewTicker(p.opts.ReportInterval)
	defer t.Stop()
	for {
		st := p.Pull(img)
		switch {
		case st.Ready:
			return nil
		case st.Err != nil && st.RetryAt.IsZero():
			return st.Err // a *PermanentError, or the puller stopped
		case st.Err != nil:
			return &RetryError{Err: st.Err, RetryAt: st.RetryAt}
		}
	wait:
		for {
			select {
			case <-st.Done:
				break wait
			case <-ctx.Done():
				return ctx.Err()
			case <-t.C():
				if watch != nil {
					watch(p.Pull(img).Progress)
				}
			}
		}
	}
}

// RetryError is a failed pull whose next attempt waits until RetryAt.
type RetryError struct {
	Err     error
	RetryAt time.Time
}

func (e *RetryError) Error() string { return e.Err.Error() }
func (e *RetryError) Unwrap() error { return e.Err }

// PermanentError is a pull that went past one of its bounds: the Image's
// max_size, the policy's deadline or virtual-size cap. Downloading again
// would go past it again, so the node does not, until the bounds change
// (the Image's max_size or the server's policy) or the Image is
// re-created.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string {
	return e.Err.Error() + "; not tried again until spec.max_size or the server's image limits change, or the Image is re-created"
}
func (e *PermanentError) Unwrap() error { return e.Err }

// failure is an image's last failed attempt.
type failure struct {
	uid string
	at  time.Time
	err error
	// A permanent failure is not retried while the bounds stay these.
	bounds bounds
}

// startLocked starts a pull of img under pol; p.mu is held.
func (p *Puller) startLocked(img *apiv1.Image, pol imagepolicy.Policy) *pull {
	name := img.GetMetadata().GetName()
	pl := &pull{p: p, img: img, uid: img.GetMetadata().GetUid(), done: make(chan struct{}), began: p.opts.Clock.Now(),
		policy: pol, bounds: boundsOf(pol, img.GetSpec())}
	p.pulls[name] = pl
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		err := pl.run(p.ctx)
		p.mu.Lock()
		if p.pulls[name] == pl {
			delete(p.pulls, name)
		}
		switch {
		case err == nil:
			delete(p.attempts, name)
			delete(p.failed, name)
		case p.ctx.Err() == nil:
			p.failed[name] = failure{uid: pl.uid, at: p.opts.Clock.Now(), err: err, bounds: pl.bounds}
		}
		p.mu.Unlock()
		close(pl.done)
	}()
	return pl
}

// nextAttempt counts an attempt and returns its number and why the last
// one failed ("" for the first).
func (p *Puller) nextAttempt(name string) (int32, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attempts[name]++
	last := ""
	if f, ok := p.failed[name]; ok {
		last = f.err.Error()
	}
	return p.attempts[name], last
}

// checkSpace fails when need bytes do not fit beside download.
func (p *Puller) checkSpace(download string, need int64) error {
	if need <= 0 {
		return nil
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(download), &st); err != nil {
		return nil // cannot tell; the write will say
	}
	if free := int64(st.Bavail) * st.Bsize; need > free {
		return fmt.Errorf("%w: the image needs %s, %s has %s free", errNoSpace, imagewait.Bytes(need), p.opts.Store.Dir(), imagewait.Bytes(free))
	}
	return nil
}

// report writes this node's entry in the Image's status; best effort.
func (p *Puller) report(ctx context.Context, name string, st *apiv1.ImageNodeStatus) {
	st.Node = p.opts.NodeName
	if len(st.Message) > 1024 {
		st.Message = st.Message[:1024] + "…"
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := p.opts.API.UpdateNodeStatus(cctx, &apiv1.UpdateImageNodeStatusRequest{Name: name, Status: st}); err != nil {
		p.log.Warn("reporting the pull failed", "image", name, "phase", st.Phase, "err", err)
	}
}
