package driver

import "errors"

// The fake's side of a live migration: Migrate blocks until the test ends
// the job (finishJob), or until AbortJob; JobStats returns what the test
// set.

var errAborted = errors.New("operation aborted: migration out job: canceled by client")

type fakeJob struct {
	params  MigrateParams // what the last Migrate was called with
	done    chan error
	stats   JobStats
	aborted bool
}

func (c *fakeConn) job(name string) *fakeJob {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.jobs == nil {
		c.jobs = map[string]*fakeJob{}
	}
	j := c.jobs[name]
	if j == nil {
		j = &fakeJob{done: make(chan error, 1)}
		c.jobs[name] = j
	}
	return j
}

// finishJob ends the domain's migration job: nil migrated it away.
func (c *fakeConn) finishJob(name string, err error) { c.job(name).done <- err }

// setJobStats sets the job's figures; whether it runs is the job's own.
func (c *fakeConn) setJobStats(name string, js JobStats) {
	j := c.job(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	js.Active, js.Completed = j.stats.Active, j.stats.Completed
	j.stats = js
}

var _ MigratingDomain = (*fakeDomain)(nil)

func (d *fakeDomain) Migrate(p MigrateParams) error {
	if err := d.with("Migrate", func(*fakeState) error { return nil }); err != nil {
		return err
	}
	j := d.c.job(d.name)
	d.c.mu.Lock()
	j.params = p
	j.stats.Active = true
	d.c.mu.Unlock()
	err := <-j.done
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	j.stats.Active = false
	if err == nil {
		j.stats.Completed = true
		if s := d.c.doms[d.name]; s != nil {
			s.state, s.reason = StateShutoff, 4 // Shutoff/Migrated
		}
	}
	return err
}

func (d *fakeDomain) JobStats(completed bool) (JobStats, error) {
	j := d.c.job(d.name)
	d.c.mu.Lock()
	defer d.c.mu.Unlock()
	js := j.stats
	if completed && !js.Completed {
		return JobStats{}, nil
	}
	return js, nil
}

func (d *fakeDomain) AbortJob() error {
	j := d.c.job(d.name)
	d.c.mu.Lock()
	if err := d.c.record("AbortJob"); err != nil {
		d.c.mu.Unlock()
		return err
	}
	first := !j.aborted
	j.aborted = true
	d.c.mu.Unlock()
	if first {
		j.done <- errAborted
	}
	return nil
}

func (d *fakeDomain) SetMaxDowntime(uint64) error {
	return d.with("SetMaxDowntime", func(*fakeState) error { return nil })
}

func (d *fakeDomain) StartPostCopy() error {
	return d.with("StartPostCopy", func(*fakeState) error { return nil })
}

func (d *fakeDomain) MigratableXML() (x string, err error) {
	err = d.with("MigratableXML", func(s *fakeState) error { x = s.xml; return nil })
	return x, err
}

// jobActive reports whether the domain's migration job runs.
func (c *fakeConn) jobActive(name string) bool {
	j := c.job(name)
	c.mu.Lock()
	defer c.mu.Unlock()
	return j.stats.Active
}
