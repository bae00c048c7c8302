package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/cluster"
)

// apiConsole reads the VM's console through the API, following it.
type apiConsole struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	text    strings.Builder
	notices []string
	err     error
}

func openConsole(ctx context.Context, c *cluster.Cluster) (*apiConsole, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.API.Consoles.Attach(ctx)
	if err == nil {
		err = stream.Send(&apiv1.ConsoleInput{Open: &apiv1.ConsoleOpen{Namespace: namespace, Name: vmName, Follow: true}})
	}
	if err != nil {
		cancel()
		return nil, fmt.Errorf("opening the console: %w", err)
	}
	con := &apiConsole{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(con.done)
		for {
			out, err := stream.Recv()
			con.mu.Lock()
			if err != nil {
				if !errors.Is(err, io.EOF) && ctx.Err() == nil {
					con.err = err
				} else {
					con.err = io.EOF
				}
				con.mu.Unlock()
				return
			}
			con.text.Write(out.GetData())
			if n := out.GetNotice(); n != "" {
				con.notices = append(con.notices, n)
			}
			con.mu.Unlock()
		}
	}()
	return con, nil
}

func (con *apiConsole) close() {
	con.cancel()
	<-con.done
}

// ticks are the counter values on complete lines, in order.
func (con *apiConsole) ticks() []int {
	con.mu.Lock()
	defer con.mu.Unlock()
	return testguest.Ticks(con.text.String())
}

func (con *apiConsole) lastTick() int {
	ts := con.ticks()
	if len(ts) == 0 {
		return 0
	}
	return ts[len(ts)-1]
}

// waitTick waits until the stream showed a counter value of at least n
// (any, for 0) and returns its line.
func (con *apiConsole) waitTick(ctx context.Context, n int) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		if last := con.lastTick(); last >= n && last > 0 {
			return fmt.Sprintf("%s n=%d", testguest.MarkerTick, last), nil
		}
		con.mu.Lock()
		err := con.err
		con.mu.Unlock()
		if err != nil {
			return "", fmt.Errorf("the console stream ended: %w", err)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return "", fmt.Errorf("waiting for the guest's counter on the console: %w", err)
		}
	}
}

// summary says what the stream showed: the counter's range and the
// notices; an error when a value is missing or repeated.
func (con *apiConsole) summary() (string, error) {
	ts := con.ticks()
	if len(ts) == 0 {
		return "", errors.New("the console showed no counter")
	}
	for i := 1; i < len(ts); i++ {
		if ts[i] != ts[i-1]+1 {
			return "", fmt.Errorf("the console showed the counter %d, then %d", ts[i-1], ts[i])
		}
	}
	con.mu.Lock()
	notices := strings.Join(con.notices, "; ")
	con.mu.Unlock()
	return fmt.Sprintf("counter %d to %d in one stream, every value once; notices: %s", ts[0], ts[len(ts)-1], notices), nil
}
