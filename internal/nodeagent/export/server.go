// Package export is the node agent's part of VM exports (docs/export.md):
// it serves, over HTTPS on the node's export address, the volumes of the
// exports the export controller labelled with this node, to requests
// that carry the export's token, while the export is Ready and not
// expired. Formats are made on the first request with qemu-img into
// <node-data-dir>/exports/<export uid>/, and removed with the export.
// An export that ends (Terminated, deleted, expired) has its downloads
// cut at once: KubeVirt stops its exporter pod the same way.
package export

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/informer"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/storage"
	"github.com/virtplane/terraform-provider-virtplane/internal/store"
)

// Classes finds a shared filesystem class's layout (the node's storage
// room): volumes on one are served from there.
type Classes interface {
	Lookup(ctx context.Context, name string) (*storage.Class, error)
}

// Contents tells which namespace a snapshot content of this node is in
// (snapshot.Contents.Owner): a snapshot's export serves only its own
// namespace's copies.
type Contents interface {
	Owner(contentUID string) (namespace string, ok, synced bool)
}

// Options configure a Server.
type Options struct {
	NodeName string
	// Watch lists and watches the exports (those labelled with this node
	// are asked for).
	Watch informer.Watcher[*apiv1.VirtualMachineExport]
	// Address is where the server listens: the node's export address.
	Address string
	// Certificate is what it serves with (pki.EnsureExportCertificate).
	Certificate tls.Certificate
	Layout      nodedir.Layout
	// Classes and Contents may be nil: then volumes on shared classes, or
	// snapshots, are not served.
	Classes  Classes
	Contents Contents
	// QemuImg is the qemu-img binary; default "qemu-img".
	QemuImg string
	Clock   clock.WithDelayedExecution
	Logger  *slog.Logger
}

// Server serves this node's exports.
type Server struct {
	opts  Options
	inf   *informer.Informer[*apiv1.VirtualMachineExport]
	log   *slog.Logger
	files singleflight.Group
	ln    net.Listener

	mu sync.Mutex
	// live is the context of each export served, by uid: cancelled when
	// the export ends, which cuts its downloads.
	live map[string]*liveExport
}

type liveExport struct {
	ctx    context.Context
	cancel context.CancelFunc
	timer  clock.Timer
}

// New returns a server; Run starts it.
func New(opts Options) (*Server, error) {
	if _, err := validation.ParseExportAddress(opts.Address); err != nil {
		return nil, fmt.Errorf("export address %q: %w", opts.Address, err)
	}
	if opts.QemuImg == "" {
		opts.QemuImg = "qemu-img"
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{opts: opts, log: opts.Logger.With("role", "export"), live: map[string]*liveExport{}}
	s.inf = informer.New(opts.Watch, store.ListOptions{LabelSelector: apiv1.LabelNodeName + "=" + opts.NodeName}, s.log.With("informer", "export"))
	s.inf.AddHandler(informer.Handler[*apiv1.VirtualMachineExport]{
		OnAdd:    s.observe,
		OnUpdate: func(_, e *apiv1.VirtualMachineExport) { s.observe(e) },
		OnDelete: func(e *apiv1.VirtualMachineExport) { s.end(e.GetMetadata().GetUid(), "deleted") },
	})
	return s, nil
}

// Dir holds the files made for exports, one directory per export uid.
func Dir(l nodedir.Layout) string { return filepath.Join(l.Root, "exports") }

// Listen opens the server's port and its files' directory.
func (s *Server) Listen() error {
	if err := os.MkdirAll(Dir(s.opts.Layout), 0o700); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.opts.Address)
	if err != nil {
		return fmt.Errorf("export server: %w", err)
	}
	s.ln = ln
	return nil
}

// Run serves (on the port Listen opened) and follows the exports in the
// background until ctx ends or the returned func is called.
func (s *Server) Run(ctx context.Context) (stop func()) {
	ln := s.ln
	ctx, cancel := context.WithCancel(ctx)
	hs := &http.Server{
		Handler: s,
		TLSConfig: &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{s.opts.Certificate},
		},
		// Downloads take as long as they take; a request's headers do not.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	var wg sync.WaitGroup
	wg.Go(func() { s.inf.Run(ctx) })
	wg.Go(func() {
		if err := hs.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("export server stopped", "err", err)
		}
	})
	wg.Go(func() {
		select {
		case <-s.inf.Synced():
			s.sweep()
		case <-ctx.Done():
		}
	})
	s.log.Info("serving exports", "address", s.opts.Address)
	return func() {
		cancel()
		_ = hs.Close()
		wg.Wait()
		s.mu.Lock()
		for uid, l := range s.live {
			l.cancel()
			l.timer.Stop()
			delete(s.live, uid)
		}
		s.mu.Unlock()
	}
}

// serving says whether e is served now: Ready and not expired.
func (s *Server) serving(e *apiv1.VirtualMachineExport) bool {
	exp := e.GetStatus().GetExpirationTime()
	return e.GetStatus().GetPhase() == apiv1.ExportReady && e.GetMetadata().GetDeletionTimestamp() == nil &&
		exp != nil && s.opts.Clock.Now().Before(exp.AsTime())
}

// observe starts or ends the serving of an export as its status says.
func (s *Server) observe(e *apiv1.VirtualMachineExport) {
	uid := e.GetMetadata().GetUid()
	if !s.serving(e) {
		// Ended, expired, or back to Pending (its VM deleted, its node
		// no longer the one): whatever it was serving stops.
		s.end(uid, e.GetStatus().GetPhase())
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.live[uid]; ok {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &liveExport{ctx: ctx, cancel: cancel}
	// Cut at the expiry by this node's clock, whatever the controller
	// writes and when.
	l.timer = s.opts.Clock.AfterFunc(e.GetStatus().GetExpirationTime().AsTime().Sub(s.opts.Clock.Now()), func() {
		// Not under the clock's lock (a fake clock calls back holding it,
		// and end stops this timer).
		go s.end(uid, "expired")
	})
	s.live[uid] = l
}

// end cuts the downloads of export uid and removes its files.
func (s *Server) end(uid, why string) {
	s.mu.Lock()
	l, ok := s.live[uid]
	delete(s.live, uid)
	s.mu.Unlock()
	if ok {
		l.cancel()
		l.timer.Stop()
		s.log.Info("export no longer served", "uid", uid, "because", why)
	}
	s.removeFiles(uid)
}

// exportContext is the context of a served export, ended with it.
func (s *Server) exportContext(uid string) (context.Context, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.live[uid]
	if !ok {
		return nil, false
	}
	return l.ctx, true
}

// sweep removes the directories of exports this node no longer serves
// (ended while the agent was down).
func (s *Server) sweep() {
	entries, err := os.ReadDir(Dir(s.opts.Layout))
	if err != nil {
		s.log.Warn("listing export files", "err", err)
		return
	}
	keep := map[string]bool{}
	for _, e := range s.inf.List() {
		if s.serving(e) {
			keep[e.GetMetadata().GetUid()] = true
		}
	}
	for _, d := range entries {
		if !keep[d.Name()] {
			s.removeFiles(d.Name())
		}
	}
}

// removeFiles removes export uid's directory; uid is checked to be a
// UUID, so the path stays in Dir.
func (s *Server) removeFiles(uid string) {
	dir, err := s.exportDir(uid)
	if err != nil {
		return
	}
	if err := os.RemoveAll(dir); err != nil {
		s.log.Warn("removing export files", "uid", uid, "err", err)
	}
}

func (s *Server) exportDir(uid string) (string, error) {
	if err := validation.CheckUID(uid); err != nil {
		return "", err
	}
	return nodedir.FileIn(Dir(s.opts.Layout), uid)
}
