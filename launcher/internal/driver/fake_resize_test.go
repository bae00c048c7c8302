package driver

import "fmt"

// The fake libvirt's disk sizes: what BlockCapacity reads and BlockResize
// grows, by target.

var _ ResizingDomain = (*fakeDomain)(nil)

func (c *fakeConn) setCapacity(dev string, bytes uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.capacity == nil {
		c.capacity = map[string]uint64{}
	}
	c.capacity[dev] = bytes
}

func (c *fakeConn) capacityOf(dev string) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.capacity[dev]
}

func (d *fakeDomain) BlockCapacity(dev string) (n uint64, err error) {
	err = d.with("BlockCapacity "+dev, func(*fakeState) error {
		var ok bool
		if n, ok = d.c.capacity[dev]; !ok {
			return fmt.Errorf("no disk %s", dev)
		}
		return nil
	})
	return n, err
}

func (d *fakeDomain) BlockResize(dev string, bytes uint64) error {
	return d.with(fmt.Sprintf("BlockResize %s %d", dev, bytes), func(s *fakeState) error {
		if !s.state.Active() {
			return fmt.Errorf("domain is not running")
		}
		if bytes < d.c.capacity[dev] {
			return fmt.Errorf("cannot shrink %s", dev)
		}
		d.c.capacity[dev] = bytes
		return nil
	})
}
