package apiserver

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// nodeCreds is the API server's view of which node certificates are
// valid: a watched cache of the NodeCredential records, so that a check
// costs a map lookup in the tap handle, and a revocation (a record deleted
// or a serial dropped) reaches every server through its watch and cancels
// the revoked certificates' open calls at once.
type nodeCreds struct {
	inf   *informer.Informer[*apiv1.NodeCredential]
	clock func() time.Time

	mu      sync.Mutex
	streams map[string]map[*trackedCall]struct{} // node → open calls
}

type trackedCall struct {
	serial string
	cancel context.CancelCauseFunc
	// subject and check are a user's or service account's: whom the
	// call is for and how it was authorized (usercreds.go).
	subject string
	mu      sync.Mutex
	check   *callCheck
}

func newCredentials(st informer.Watcher[*apiv1.NodeCredential], clock func() time.Time, log *slog.Logger) *nodeCreds {
	c := &nodeCreds{clock: clock, streams: map[string]map[*trackedCall]struct{}{}}
	if st == nil {
		return c
	}
	c.inf = informer.New(st, store.ListOptions{}, log.With("informer", "nodecredentials"))
	c.inf.AddHandler(informer.Handler[*apiv1.NodeCredential]{
		OnUpdate: func(_, nc *apiv1.NodeCredential) { c.cut(nc.GetMetadata().GetName(), nc) },
		OnDelete: func(nc *apiv1.NodeCredential) { c.cut(nc.GetMetadata().GetName(), nil) },
	})
	return c
}

// run keeps the cache until ctx ends.
func (c *nodeCreds) run(ctx context.Context) {
	if c.inf != nil {
		c.inf.Run(ctx)
	}
}

// check accepts a node certificate only while its node's record lists its
// serial and it has not expired by the record.
func (c *nodeCreds) check(node, serial string) error {
	if c.inf == nil {
		return status.Error(codes.Unauthenticated, "this server accepts no node certificates")
	}
	if !c.inf.HasSynced() {
		return status.Error(codes.Unavailable, "node credentials are still loading; retry")
	}
	nc, ok := c.inf.Get("", node)
	if !ok || !listed(nc, serial, c.clock()) {
		return status.Errorf(codes.Unauthenticated,
			"node %s: certificate %s is revoked or was never issued: join again with a new bootstrap token", node, serial)
	}
	return nil
}

func listed(nc *apiv1.NodeCredential, serial string, now time.Time) bool {
	return slices.ContainsFunc(nc.GetCertificates(), func(c *apiv1.NodeCertificate) bool {
		return c.GetSerial() == serial && now.Before(c.GetNotAfter().AsTime())
	})
}

// track returns ctx cancelled when the call ends or when its certificate
// is revoked.
func (c *nodeCreds) track(ctx context.Context, id Identity) context.Context {
	ctx, cancel := context.WithCancelCause(ctx)
	tc := &trackedCall{serial: id.Serial, cancel: cancel}
	c.mu.Lock()
	if c.streams[id.Node] == nil {
		c.streams[id.Node] = map[*trackedCall]struct{}{}
	}
	c.streams[id.Node][tc] = struct{}{}
	c.mu.Unlock()
	context.AfterFunc(ctx, func() {
		c.mu.Lock()
		delete(c.streams[id.Node], tc)
		if len(c.streams[id.Node]) == 0 {
			delete(c.streams, id.Node)
		}
		c.mu.Unlock()
	})
	return ctx
}

// cut cancels the node's calls whose certificates nc (nil: deleted) no
// longer lists.
func (c *nodeCreds) cut(node string, nc *apiv1.NodeCredential) {
	now := c.clock()
	c.mu.Lock()
	var revoked []*trackedCall
	for tc := range c.streams[node] {
		if nc == nil || !listed(nc, tc.serial, now) {
			revoked = append(revoked, tc)
		}
	}
	c.mu.Unlock()
	for _, tc := range revoked {
		tc.cancel(status.Errorf(codes.Unauthenticated, "node %s: certificate %s was revoked", node, tc.serial))
	}
}
