package apiserver

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// registry is a grpc.ServiceRegistrar that keeps what is registered, by
// service name, and counts registrations of a name.
type registry struct {
	descs map[string]*grpc.ServiceDesc
	impls map[string]any
	times map[string]int
}

func newRegistry() *registry {
	return &registry{descs: map[string]*grpc.ServiceDesc{}, impls: map[string]any{}, times: map[string]int{}}
}

func (r *registry) RegisterService(sd *grpc.ServiceDesc, impl any) {
	r.descs[sd.ServiceName], r.impls[sd.ServiceName] = sd, impl
	r.times[sd.ServiceName]++
}

// Every service of the API is registered, once, by Server.Register,
// and nothing else is: a service added to a .proto file without its
// entry fails here instead of answering Unimplemented to every call.
func TestEveryServiceIsRegistered(t *testing.T) {
	reg := newRegistry()
	New(Stores{}, Options{}).Register(reg)
	api := map[string]bool{}
	for _, sd := range apiv1.Services() {
		name := string(sd.FullName())
		api[name] = true
		switch n := reg.times[name]; n {
		case 0:
			t.Errorf("service %s is in the API but not registered: it has no line in Server.Register (server.go)", name)
		case 1:
		default:
			t.Errorf("service %s is registered %d times", name, n)
		}
	}
	for name := range reg.times {
		if !api[name] {
			t.Errorf("registered %s, which is no service of apiv1.Services()", name)
		}
	}
}

// Every method of every registered service is served by the service's
// own code, not by the Unimplemented fallback its type embeds: each is
// called with an empty request on a context that is done, and may refuse
// it in any way but Unimplemented. So a method added to a service, or a
// service's one-line delegation forgotten, fails here.
func TestEveryMethodIsServed(t *testing.T) {
	f := newFixture(t)
	reg := newRegistry()
	f.srv.Register(reg)
	ctx, cancel := context.WithCancel(WithIdentity(context.Background(), Identity{Kind: Admin, Peer: "test"}))
	cancel()
	called := 0
	for name, sd := range reg.descs {
		impl := reg.impls[name]
		for _, m := range sd.Methods {
			full := "/" + name + "/" + m.MethodName
			called++
			_, err := m.Handler(impl, ctx, func(any) error { return nil }, nil)
			if status.Code(err) == codes.Unimplemented {
				t.Errorf("%s: %v", full, err)
			}
		}
		for _, s := range sd.Streams {
			full := "/" + name + "/" + s.StreamName
			called++
			if err := s.Handler(impl, &emptyStream{ctx: ctx}); status.Code(err) == codes.Unimplemented {
				t.Errorf("%s: %v", full, err)
			}
		}
	}
	want := 0
	for _, sd := range apiv1.Services() {
		want += sd.Methods().Len()
	}
	if called != want {
		t.Errorf("called %d methods, want the API's %d", called, want)
	}
}

// emptyStream is a server stream whose client sent one empty message and
// then nothing, on a context that is done.
type emptyStream struct {
	ctx  context.Context
	read bool
}

func (s *emptyStream) SetHeader(metadata.MD) error  { return nil }
func (s *emptyStream) SendHeader(metadata.MD) error { return nil }
func (s *emptyStream) SetTrailer(metadata.MD)       {}
func (s *emptyStream) Context() context.Context     { return s.ctx }
func (s *emptyStream) SendMsg(any) error            { return nil }

func (s *emptyStream) RecvMsg(any) error {
	if s.read {
		return s.ctx.Err()
	}
	s.read = true
	return nil
}
