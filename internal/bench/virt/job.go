package virt

import "time"

// Migration is what one raw live migration cost: the wall clock of the
// migrate call, and libvirt's completed job statistics on the source.
type Migration struct {
	// Start is when the virDomainMigrateToURI3 call was issued; Wall is
	// how long it took to return.
	Start time.Time
	Wall  time.Duration
	// Elapsed is libvirt's job time (time_elapsed of the completed job).
	Elapsed time.Duration
	// Downtime is the guest's downtime as QEMU measured it; HasDowntime
	// is false when libvirt did not report one.
	Downtime    time.Duration
	HasDowntime bool
	// DataBytes is the data the job processed (memory moved).
	DataBytes uint64
}
