package driver

import (
	"errors"
	"fmt"
	"os"

	"libvirt.org/go/libvirtxml"
)

// The fake's side of an online snapshot: CreateDiskSnapshot moves each
// listed disk onto its overlay (an empty file, as libvirt creates it) in
// the domain XML, BlockCommitActive starts a job that is ready at once
// unless the test holds it (commitHeld), and PivotBlockJob moves the disk
// back onto the file below.

var errNoAgent = fmt.Errorf("%w: QEMU guest agent is not connected", ErrNoGuestAgent)

type fakeSnap struct {
	noAgent    bool
	frozen     bool
	freezes    int
	thaws      int
	commitHeld bool
	// pivotRefusals: how many pivots libvirt refuses as not ready yet
	// (its READY event still on the way) although the job info says ready.
	pivotRefusals int
	jobs          map[string]*BlockJobInfo // by target dev
}

func (c *fakeConn) snap() *fakeSnap {
	if c.snaps == nil {
		c.snaps = &fakeSnap{jobs: map[string]*BlockJobInfo{}}
	}
	return c.snaps
}

var _ SnapshottingDomain = (*fakeDomain)(nil)

func (d *fakeDomain) FSFreeze() error {
	return d.with("FSFreeze", func(*fakeState) error {
		sn := d.c.snap()
		if sn.noAgent {
			return errNoAgent
		}
		sn.frozen = true
		sn.freezes++
		return nil
	})
}

func (d *fakeDomain) FSThaw() error {
	return d.with("FSThaw", func(*fakeState) error {
		sn := d.c.snap()
		sn.frozen = false
		sn.thaws++
		return nil
	})
}

// editDisks rewrites the domain XML's disks with fn.
func editDisks(s *fakeState, fn func(disk *libvirtxml.DomainDisk) error) error {
	var def libvirtxml.Domain
	if err := def.Unmarshal(s.xml); err != nil {
		return err
	}
	for i := range def.Devices.Disks {
		if err := fn(&def.Devices.Disks[i]); err != nil {
			return err
		}
	}
	x, err := def.Marshal()
	if err != nil {
		return err
	}
	s.xml = x
	return nil
}

func (d *fakeDomain) CreateDiskSnapshot(snap *libvirtxml.DomainSnapshot) error {
	return d.with("CreateDiskSnapshot", func(s *fakeState) error {
		ext := map[string]string{}
		for _, sd := range snap.Disks.Disks {
			if sd.Snapshot == "external" {
				ext[sd.Name] = sd.Source.File.File
			}
		}
		return editDisks(s, func(disk *libvirtxml.DomainDisk) error {
			o, ok := ext[disk.Target.Dev]
			if !ok {
				return nil
			}
			if _, err := os.Stat(o); err == nil {
				return fmt.Errorf("external snapshot file %s already exists", o)
			}
			if err := os.WriteFile(o, nil, 0o600); err != nil {
				return err
			}
			disk.BackingStore = &libvirtxml.DomainDiskBackingStore{Source: disk.Source}
			disk.Source = &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: o}}
			return nil
		})
	})
}

func (d *fakeDomain) BlockCommitActive(dev string) error {
	return d.with("BlockCommit:"+dev, func(*fakeState) error {
		sn := d.c.snap()
		if sn.jobs[dev] != nil {
			return errors.New("disk is already in use by a block job")
		}
		j := &BlockJobInfo{Commit: true, Cur: 10, End: 10}
		if sn.commitHeld {
			j.Cur = 5
		}
		sn.jobs[dev] = j
		return nil
	})
}

func (d *fakeDomain) BlockJob(dev string) (job BlockJobInfo, ok bool, err error) {
	err = d.with("BlockJob", func(*fakeState) error {
		if j := d.c.snap().jobs[dev]; j != nil {
			job, ok = *j, true
		}
		return nil
	})
	return job, ok, err
}

func (d *fakeDomain) PivotBlockJob(dev string) error {
	return d.with("Pivot:"+dev, func(s *fakeState) error {
		sn := d.c.snap()
		j := sn.jobs[dev]
		if j == nil || !j.Ready() {
			return errors.New("block job not ready for pivot")
		}
		if sn.pivotRefusals > 0 {
			sn.pivotRefusals--
			return fmt.Errorf("%w: block copy still active", ErrJobNotReady)
		}
		delete(sn.jobs, dev)
		return editDisks(s, func(disk *libvirtxml.DomainDisk) error {
			if disk.Target.Dev == dev && disk.BackingStore != nil {
				disk.Source, disk.BackingStore = disk.BackingStore.Source, nil
			}
			return nil
		})
	})
}

// releaseCommits makes the held commit jobs ready.
func (c *fakeConn) releaseCommits() {
	c.mu.Lock()
	defer c.mu.Unlock()
	sn := c.snap()
	sn.commitHeld = false
	for _, j := range sn.jobs {
		j.Cur = j.End
	}
}

// snapState returns a copy of the fake's snapshot state.
func (c *fakeConn) snapState() fakeSnap {
	c.mu.Lock()
	defer c.mu.Unlock()
	return *c.snap()
}

func (c *fakeConn) setSnap(fn func(*fakeSnap)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	fn(c.snap())
}
