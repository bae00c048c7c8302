//go:build libvirt

package virt

import (
	"fmt"
	"strings"
	"time"

	"libvirt.org/go/libvirt"
)

// MigrateFlags are the flags virtplane's launcher migrates with
// (launcher/internal/virt/migrate.go, with the cluster's defaults: no
// disks to copy, no auto-converge, no post-copy, no TLS): a live,
// peer-to-peer job that defines the domain persistently on the target and
// leaves the source defined. Kept the same on purpose: the raw path is
// the floor of what the launcher asks libvirt to do.
const MigrateFlags = libvirt.MIGRATE_LIVE | libvirt.MIGRATE_PEER2PEER | libvirt.MIGRATE_PERSIST_DEST

// MigrateLive live-migrates domain name to the libvirtd at targetURI
// (peer to peer: the source's libvirtd connects there), with QEMU's stream
// to addr, as the launcher does (its URI and listen address parameters;
// no bandwidth limit and libvirt's default maximum downtime, the cluster's
// defaults). It blocks until libvirt's job ended and then reads the
// completed job's statistics on the source.
func (c *Conn) MigrateLive(name, targetURI, addr string) (Migration, error) {
	d, err := c.c.LookupDomainByName(name)
	if err != nil {
		return Migration{}, fmt.Errorf("looking up %s: %w", name, err)
	}
	defer d.Free()
	host := addr
	if strings.Contains(addr, ":") {
		host = "[" + addr + "]"
	}
	params := &libvirt.DomainMigrateParameters{
		URISet: true, URI: "tcp://" + host,
		ListenAddressSet: true, ListenAddress: addr,
	}
	t0 := time.Now()
	if err := d.MigrateToURI3(targetURI, params, MigrateFlags); err != nil {
		return Migration{}, fmt.Errorf("migrating %s to %s: %w", name, targetURI, err)
	}
	m := Migration{Start: t0, Wall: time.Since(t0)}
	// The source keeps the completed job (it stays defined, inactive).
	info, err := d.GetJobStats(libvirt.DOMAIN_JOB_STATS_COMPLETED)
	if err != nil {
		return m, fmt.Errorf("completed job statistics of %s: %w", name, err)
	}
	m.Elapsed = time.Duration(info.TimeElapsed) * time.Millisecond
	m.Downtime, m.HasDowntime = time.Duration(info.Downtime)*time.Millisecond, info.DowntimeSet
	m.DataBytes = info.DataProcessed
	return m, nil
}
