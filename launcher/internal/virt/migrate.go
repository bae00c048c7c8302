//go:build libvirt

package virt

import (
	"strings"

	"libvirt.org/go/libvirt"

	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver"
)

var _ driver.MigratingDomain = (*domain)(nil)

// Migrate runs libvirt's peer-to-peer live migration job to p.TargetURI
// and blocks until it ends. The source domain stays defined (not
// UNDEFINE_SOURCE) so that its completed job statistics can still be read
// and the node agent removes it like any ended instance.
func (d *domain) Migrate(p driver.MigrateParams) error {
	flags := libvirt.MIGRATE_LIVE | libvirt.MIGRATE_PEER2PEER | libvirt.MIGRATE_PERSIST_DEST
	if len(p.CopyDisks) > 0 {
		// Only the top layer of each listed disk is copied: the target has
		// the base image already and created an empty overlay (or an empty
		// volume, whose top layer is all of it) of the same size.
		flags |= libvirt.MIGRATE_NON_SHARED_INC
	}
	if p.AutoConverge {
		flags |= libvirt.MIGRATE_AUTO_CONVERGE
	}
	if p.PostCopy {
		flags |= libvirt.MIGRATE_POSTCOPY
	}
	if p.TLS {
		flags |= libvirt.MIGRATE_TLS
	}
	if p.SharedFiles {
		flags |= libvirt.MIGRATE_UNSAFE
	}
	persist := p.PersistXML
	if persist == "" {
		persist = p.DestXML
	}
	params := &libvirt.DomainMigrateParameters{
		DestXMLSet:    true,
		DestXML:       p.DestXML,
		PersistXMLSet: true,
		PersistXML:    persist,
	}
	if p.Address != "" {
		// QEMU's stream goes to the target's migration address; the port
		// comes from the target's own range.
		params.URISet, params.URI = true, "tcp://"+hostForURI(p.Address)
		params.ListenAddressSet, params.ListenAddress = true, p.Address
	}
	if p.BandwidthMiB > 0 {
		params.BandwidthSet, params.Bandwidth = true, p.BandwidthMiB
	}
	if len(p.CopyDisks) > 0 {
		params.MigrateDisksSet, params.MigrateDisks = true, p.CopyDisks
		if p.Address != "" {
			params.DisksURISet, params.DisksURI = true, "tcp://"+hostForURI(p.Address)
		}
	}
	return d.wrap(d.d.MigrateToURI3(p.TargetURI, params, flags))
}

// hostForURI brackets an IPv6 literal.
func hostForURI(addr string) string {
	if strings.Contains(addr, ":") {
		return "[" + addr + "]"
	}
	return addr
}

// JobStats reads the running job's statistics, or the last completed
// job's when completed is set.
func (d *domain) JobStats(completed bool) (driver.JobStats, error) {
	var flags libvirt.DomainGetJobStatsFlags
	if completed {
		flags = libvirt.DOMAIN_JOB_STATS_COMPLETED
	}
	info, err := d.d.GetJobStats(flags)
	if err != nil {
		return driver.JobStats{}, d.wrap(err)
	}
	return driver.JobStats{
		Active:        info.Type == libvirt.DOMAIN_JOB_BOUNDED || info.Type == libvirt.DOMAIN_JOB_UNBOUNDED,
		Completed:     info.Type == libvirt.DOMAIN_JOB_COMPLETED,
		Failed:        info.Type == libvirt.DOMAIN_JOB_FAILED,
		Cancelled:     info.Type == libvirt.DOMAIN_JOB_CANCELLED,
		DataTotal:     info.DataTotal,
		DataProcessed: info.DataProcessed,
		DataRemaining: info.DataRemaining,
		MemBps:        info.MemBps,
		DiskTotal:     info.DiskTotal,
		DiskProcessed: info.DiskProcessed,
		DowntimeMs:    info.Downtime,
		ElapsedMs:     info.TimeElapsed,
	}, nil
}

// AbortJob aborts the running migration job.
func (d *domain) AbortJob() error { return d.wrap(d.d.AbortJob()) }

// SetMaxDowntime sets the downtime QEMU may take to switch over.
func (d *domain) SetMaxDowntime(ms uint64) error {
	return d.wrap(d.d.MigrateSetMaxDowntime(ms, 0))
}

// StartPostCopy switches a running migration to post-copy.
func (d *domain) StartPostCopy() error { return d.wrap(d.d.MigrateStartPostCopy(0)) }

// MigratableXML is the persistent definition in the form libvirt sends
// to a migration target.
func (d *domain) MigratableXML() (string, error) {
	x, err := d.d.GetXMLDesc(libvirt.DOMAIN_XML_MIGRATABLE | libvirt.DOMAIN_XML_INACTIVE)
	return x, d.wrap(err)
}
