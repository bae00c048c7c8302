package launcher

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

// ErrDetached is returned by a Client after Detach or Stop.
var ErrDetached = errors.New("launcher client is detached")

// eventBuffer is how many DomainEvents a slow Events consumer may lag.
const eventBuffer = 16

// grpcClient implements Client over the generated gRPC client. What it
// does on Detach and Stop depends on how the connection was made, so
// those are injected.
type grpcClient struct {
	rpc launcherpb.LauncherClient
	// detach closes the connection without touching the process.
	detach func()
	// stop ends the launcher process; nil when it cannot (tests).
	stop func(ctx context.Context) error

	mu       sync.Mutex
	detached bool
}

var _ Client = (*grpcClient)(nil)

// NewClient wraps an established launcher connection. detach must close
// the connection without ending the launcher; stop, if not nil, ends it.
// Manager uses it; tests use it over plugin.TestPluginGRPCConn.
func NewClient(rpc launcherpb.LauncherClient, detach func(), stop func(context.Context) error) Client {
	if detach == nil {
		detach = func() {}
	}
	return &grpcClient{rpc: rpc, detach: detach, stop: stop}
}

func (c *grpcClient) check() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.detached {
		return ErrDetached
	}
	return nil
}

// call runs one unary RPC returning a DomainStatus.
func (c *grpcClient) call(ctx context.Context, name string, fn func(context.Context) (*launcherpb.DomainStatus, error)) (*launcherpb.DomainStatus, error) {
	return unary(c, ctx, name, fn)
}

// unary runs one unary RPC unless the client is detached, naming it in
// the error.
func unary[T any](c *grpcClient, ctx context.Context, name string, fn func(context.Context) (T, error)) (T, error) {
	if err := c.check(); err != nil {
		var zero T
		return zero, err
	}
	out, err := fn(ctx)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("launcher %s: %w", name, err)
	}
	return out, nil
}

func (c *grpcClient) Sync(ctx context.Context, vmi *apiv1.VirtualMachineInstance, opts *launcherpb.SyncOptions) (*launcherpb.DomainStatus, error) {
	return c.call(ctx, "Sync", func(ctx context.Context) (*launcherpb.DomainStatus, error) {
		return c.rpc.Sync(ctx, &launcherpb.SyncRequest{Vmi: vmi, Options: opts})
	})
}

func (c *grpcClient) Shutdown(ctx context.Context) (*launcherpb.DomainStatus, error) {
	return c.call(ctx, "Shutdown", func(ctx context.Context) (*launcherpb.DomainStatus, error) {
		return c.rpc.Shutdown(ctx, &launcherpb.ShutdownRequest{})
	})
}

func (c *grpcClient) Kill(ctx context.Context) (*launcherpb.DomainStatus, error) {
	return c.call(ctx, "Kill", func(ctx context.Context) (*launcherpb.DomainStatus, error) {
		return c.rpc.Kill(ctx, &launcherpb.Empty{})
	})
}

func (c *grpcClient) Delete(ctx context.Context) (*launcherpb.DomainStatus, error) {
	return c.call(ctx, "Delete", func(ctx context.Context) (*launcherpb.DomainStatus, error) {
		return c.rpc.Delete(ctx, &launcherpb.Empty{})
	})
}

func (c *grpcClient) Pause(ctx context.Context) (*launcherpb.DomainStatus, error) {
	return c.call(ctx, "Pause", func(ctx context.Context) (*launcherpb.DomainStatus, error) {
		return c.rpc.Pause(ctx, &launcherpb.Empty{})
	})
}

func (c *grpcClient) Unpause(ctx context.Context) (*launcherpb.DomainStatus, error) {
	return c.call(ctx, "Unpause", func(ctx context.Context) (*launcherpb.DomainStatus, error) {
		return c.rpc.Unpause(ctx, &launcherpb.Empty{})
	})
}

func (c *grpcClient) GetDomain(ctx context.Context) (*launcherpb.DomainStatus, error) {
	return c.call(ctx, "GetDomain", func(ctx context.Context) (*launcherpb.DomainStatus, error) {
		return c.rpc.GetDomain(ctx, &launcherpb.Empty{})
	})
}

func (c *grpcClient) Ping(ctx context.Context) error {
	_, err := c.ping(ctx)
	return err
}

func (c *grpcClient) ping(ctx context.Context) (*launcherpb.PingResponse, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	p, err := c.rpc.Ping(ctx, &launcherpb.Empty{})
	if err != nil {
		return nil, fmt.Errorf("launcher Ping: %w", err)
	}
	return p, nil
}

func (c *grpcClient) RenewLease(ctx context.Context, validFor time.Duration) error {
	if err := c.check(); err != nil {
		return err
	}
	if validFor < 0 {
		return fmt.Errorf("launcher RenewLease: negative duration %s", validFor)
	}
	if _, err := c.rpc.RenewLease(ctx, &launcherpb.LeaseRequest{ValidForMillis: validFor.Milliseconds()}); err != nil {
		return fmt.Errorf("launcher RenewLease: %w", err)
	}
	return nil
}

// Events opens the stream and waits for its first message (the current
// status), so an unreachable launcher is an error here rather than a
// silently closed channel. The channel closes when ctx ends, the stream
// breaks or the client is detached.
func (c *grpcClient) Events(ctx context.Context) (<-chan *launcherpb.DomainEvent, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.rpc.Events(ctx, &launcherpb.Empty{})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("launcher Events: %w", err)
	}
	first, err := stream.Recv()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("launcher Events: %w", err)
	}
	ch := make(chan *launcherpb.DomainEvent, eventBuffer)
	ch <- first
	go func() {
		defer cancel()
		defer close(ch)
		for {
			ev, err := stream.Recv()
			if err != nil {
				return
			}
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

// Detach closes the connection and leaves the launcher (and its domain)
// running; Reattach finds it again from the Handle.
func (c *grpcClient) Detach() {
	c.mu.Lock()
	already := c.detached
	c.detached = true
	c.mu.Unlock()
	if !already {
		c.detach()
	}
}

// Stop ends the launcher process. The domain is not touched: call it
// after Delete, or the domain keeps running under libvirtd unmanaged.
func (c *grpcClient) Stop(ctx context.Context) error {
	if c.stop == nil {
		return errors.New("launcher Stop: this client cannot end its launcher process")
	}
	c.mu.Lock()
	c.detached = true
	c.mu.Unlock()
	return c.stop(ctx)
}
