// Package target opens the backup repository a BackupTarget names
// (package backup/repo: a directory or an S3 bucket prefix), probes it,
// and words what goes wrong with it naming the target's field to look
// at. The server (the backup controllers, ListManifests) and the node
// agents (uploads, restores) reach targets only through here.
//
// A target's secret key is in the object the caller passes, never in a
// log line or an error: minio-go's errors carry the service's code and
// message, not the credentials.
package target

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/backup/repo"
)

// OpenTimeout bounds opening a target (an S3 bucket check): an
// unreachable endpoint fails within it, with the cause.
const OpenTimeout = 20 * time.Second

// Store opens the store target t names. t must carry its secret key
// (the stored object, or a node's Connect answer).
func Store(ctx context.Context, t *apiv1.BackupTarget) (repo.Store, error) {
	switch s := t.GetSpec(); {
	case s.GetDirectory() != nil:
		return repo.OpenDir(s.GetDirectory().GetPath())
	case s.GetS3() != nil:
		s3 := s.GetS3()
		prefix := s3.GetPrefix()
		if prefix != "" {
			prefix += "/"
		}
		cfg := repo.S3Config{
			Endpoint: s3.GetEndpoint(), Bucket: s3.GetBucket(), Prefix: prefix, Region: s3.GetRegion(),
			AccessKey: s3.GetAccessKey(), SecretKey: s3.GetSecretKey(),
		}
		if ca := s3.GetCaCert(); ca != "" {
			cfg.CACertPEM = []byte(ca)
		}
		ctx, cancel := context.WithTimeout(ctx, OpenTimeout)
		defer cancel()
		return repo.OpenS3(ctx, cfg)
	}
	return nil, errors.New("the backup target has neither directory nor s3")
}

// Cache keeps one open store per target, opened again when its spec
// changes: opening an S3 store checks the bucket (a round trip), and a
// directory store holds the directory open (an os.Root). A store dropped
// from the cache is never closed by it: the controllers and the manifest
// reader share it and may still be using it; a directory store's handle
// is closed when the store is collected (os.Root's finalizer).
type Cache struct {
	mu    sync.Mutex
	items map[string]cached
}

type cached struct {
	spec  *apiv1.BackupTargetSpec
	store repo.Store
}

// NewCache returns an empty cache.
func NewCache() *Cache { return &Cache{items: map[string]cached{}} }

// Store is the open store of t, opened now when the cache has none for
// its current spec.
func (c *Cache) Store(ctx context.Context, t *apiv1.BackupTarget) (repo.Store, error) {
	name := t.GetMetadata().GetName()
	c.mu.Lock()
	it, ok := c.items[name]
	c.mu.Unlock()
	if ok && proto.Equal(it.spec, t.GetSpec()) {
		return it.store, nil
	}
	st, err := Store(ctx, t)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items[name] = cached{spec: proto.Clone(t.GetSpec()).(*apiv1.BackupTargetSpec), store: st}
	return st, nil
}

// Forget drops the store of target name: the next Store opens it anew.
func (c *Cache) Forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.items, name)
}

// probePrefix is where probe objects go: outside the repository's
// chunks/ and manifests/, so nothing else ever reads them.
const probePrefix = "probes/"

// Probe checks that the store takes writes, reads them back as written
// and deletes them: what backups need of a target.
func Probe(ctx context.Context, st repo.Store) error {
	var b [8]byte
	_, _ = rand.Read(b[:])
	key := probePrefix + hex.EncodeToString(b[:])
	body := []byte("virtplane backup target probe " + key)
	if err := st.Put(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
		return fmt.Errorf("writing a probe object: %w", err)
	}
	defer func() { _ = st.Delete(context.WithoutCancel(ctx), key) }()
	rc, err := st.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("reading the probe object back: %w", err)
	}
	got, err := io.ReadAll(io.LimitReader(rc, int64(len(body))+1))
	_ = rc.Close()
	if err != nil {
		return fmt.Errorf("reading the probe object back: %w", err)
	}
	if !bytes.Equal(got, body) {
		return errors.New("the probe object read back differs from what was written")
	}
	if err := st.Delete(ctx, key); err != nil {
		return fmt.Errorf("deleting the probe object: %w", err)
	}
	return nil
}

// Reasons of a target's Ready condition.
const (
	ReasonReachable    = "Reachable"
	ReasonUnreachable  = "Unreachable"
	ReasonKeyRefused   = "KeyRefused"
	ReasonNoBucket     = "BucketNotFound"
	ReasonNoDirectory  = "DirectoryNotFound"
	ReasonNotWritable  = "NotWritable"
	ReasonProbeFailed  = "ProbeFailed"
	readyMessage       = "the server wrote, read back and deleted a probe object"
	maxConditionLength = 900
)

// Condition is the Ready condition of t after a probe that ended with
// err (nil: ready): the reason says which kind of failure, the message
// names the field to look at.
func Condition(t *apiv1.BackupTarget, err error, now time.Time) *apiv1.Condition {
	c := &apiv1.Condition{Type: apiv1.ConditionReady, Status: apiv1.ConditionTrue, Reason: ReasonReachable, Message: readyMessage,
		LastProbeTime: timestamppb.New(now)}
	if err == nil {
		return c
	}
	c.Status = apiv1.ConditionFalse
	c.Reason, c.Message = Explain(t, err)
	return c
}

// Explain words err, an error of opening or using t's store, naming the
// field of t to look at; reason is one of the Reason constants.
func Explain(t *apiv1.BackupTarget, err error) (reason, message string) {
	isS3 := t.GetSpec().GetS3() != nil
	// The service's error code, through the wrapping of the repository's
	// errors (minio.ToErrorResponse looks at err itself only).
	var er minio.ErrorResponse
	code := ""
	if errors.As(err, &er) {
		code = er.Code
	}
	var netErr net.Error
	var urlErr *url.Error
	switch {
	case code == "InvalidAccessKeyId" || code == "SignatureDoesNotMatch" || code == "AccessDenied" || code == "InvalidToken":
		reason, message = ReasonKeyRefused, "the service refused the keys (spec.s3.access_key, spec.s3.secret_key)"
	case code == minio.NoSuchBucket || (isS3 && errors.Is(err, repo.ErrNotFound) && !errors.Is(err, repo.ErrCorrupt)):
		reason, message = ReasonNoBucket, "the bucket does not exist (spec.s3.bucket)"
	case isS3 && (errors.As(err, &netErr) || errors.As(err, &urlErr) || errors.Is(err, context.DeadlineExceeded)):
		reason, message = ReasonUnreachable, "the endpoint does not answer (spec.s3.endpoint)"
	case !isS3 && errors.Is(err, fs.ErrNotExist):
		reason, message = ReasonNoDirectory, "the directory does not exist on the server (spec.directory.path)"
	case !isS3 && errors.Is(err, fs.ErrPermission):
		reason, message = ReasonNotWritable, "the directory is not writable (spec.directory.path)"
	default:
		reason, message = ReasonProbeFailed, "the probe failed"
	}
	message += ": " + err.Error()
	if len(message) > maxConditionLength {
		message = message[:maxConditionLength] + "…"
	}
	return reason, message
}
