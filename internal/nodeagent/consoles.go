package nodeagent

import (
	"context"
	"errors"
	"fmt"

	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/console"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// consoleRoom is what the agent needs of package console: serving the
// node's console sessions, and keeping an ended instance's log.
type consoleRoom interface {
	Run(ctx context.Context)
	Keep(rec *state.VMI) error
}

// consoleInstances tells the console which instances the agent handles
// and where their serial ptys are.
type consoleInstances struct{ a *Agent }

var _ console.Instances = consoleInstances{}

func (c consoleInstances) Record(uid string) *state.VMI {
	rec, err := c.a.db.GetVMI(uid)
	if err != nil {
		if !errors.Is(err, state.ErrNotFound) {
			c.a.log.Warn("reading state record", "vmi_uid", uid, "err", err)
		}
		return nil
	}
	return rec
}

func (c consoleInstances) SerialPty(ctx context.Context, rec *state.VMI) (string, error) {
	a := c.a
	e := a.launchers.Get(rec.Key())
	if e == nil || e.UID != rec.UID || e.Dead() {
		return "", errors.New("the instance's launcher is not connected")
	}
	cctx, cancel := context.WithTimeout(ctx, a.opts.Timing.CallTimeout)
	dom, err := e.Client.GetDomain(cctx)
	cancel()
	if err != nil {
		return "", fmt.Errorf("asking the launcher for the serial port: %w", err)
	}
	pty := dom.GetConsolePty()
	if pty == "" {
		return "", errors.New("the domain has no serial pty (it is not running)")
	}
	return pty, nil
}
