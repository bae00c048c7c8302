package driver

import "errors"

// A start that hangs, as libvirt's create does while QEMU waits for an
// OSD that does not answer: the domain sits paused until it is destroyed,
// and the create then fails (docs/notes/storage-probes.md: "process
// exited while connecting to monitor").

// hangNextCreate makes the next Create hang until a Destroy.
func (c *fakeConn) hangNextCreate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hang = make(chan struct{})
}

func (c *fakeConn) takeHang() chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := c.hang
	c.hang = nil
	if h != nil {
		c.hanging = h
	}
	return h
}

// unhang lets a hanging Create return: libvirt's destroy kills QEMU.
func (c *fakeConn) unhang() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hanging != nil {
		close(c.hanging)
		c.hanging = nil
	}
}

func (d *fakeDomain) hangingCreate(hang chan struct{}) error {
	if err := d.with("Create", func(s *fakeState) error {
		s.state, s.reason = StatePaused, 0 // starting
		return nil
	}); err != nil {
		return err
	}
	<-hang
	_ = d.with("Create returns", func(s *fakeState) error {
		s.state, s.reason = StateShutoff, 6 // failed
		return nil
	})
	return errors.New("internal error: process exited while connecting to monitor")
}
