package driver

import (
	"fmt"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// MonitorInterval is how often a running migration's job statistics are
// read (KubeVirt's monitor polls every 400 ms).
var MonitorInterval = 500 * time.Millisecond

const gib = 1 << 30

// monitorMigration follows libvirt's job while it runs: it records the
// progress, sets the maximum downtime once the job exists, and aborts the
// job (or switches it to post-copy, when allowed) when it runs past its
// completion timeout or makes no progress for the progress timeout, as
// KubeVirt's launcher does.
func (d *Driver) monitorMigration(mdom MigratingDomain, m *migration, cfg *apiv1.MigrationConfiguration, dataBytes int64) {
	defer d.wg.Done()
	tick := time.NewTicker(MonitorInterval)
	defer tick.Stop()

	start := d.cfg.Now()
	perGiB := time.Duration(cfg.GetCompletionTimeoutPerGibSeconds()) * time.Second
	// Acceptable time: the per-GiB allowance times the data, in whole GiB.
	acceptable := perGiB * time.Duration(max((dataBytes+gib-1)/gib, 1))
	progressTimeout := time.Duration(cfg.GetProgressTimeoutSeconds()) * time.Second
	downtimeSet := cfg.GetMaxDowntimeMs() <= 0

	lastRemaining := int64(-1)
	lastProgress := start
	for {
		select {
		case <-m.done:
			return
		case <-d.done:
			return
		case <-tick.C:
		}
		js, err := mdom.JobStats(false)
		if err != nil || !js.Active {
			continue
		}
		now := d.cfg.Now()
		d.migs.mu.Lock()
		if m.st.GetRunning() {
			m.st.Progress = progressOf(js, now)
		}
		mode := m.st.GetMode()
		d.migs.mu.Unlock()

		if !downtimeSet {
			if err := mdom.SetMaxDowntime(uint64(cfg.GetMaxDowntimeMs())); err != nil {
				d.log.Warn("setting the migration's maximum downtime", "err", err)
			}
			downtimeSet = true
		}
		if mode == apiv1.MigrationModePostCopy {
			continue // post-copy cannot be aborted without losing the guest
		}
		remaining := int64(js.DataRemaining)
		if lastRemaining < 0 || remaining < lastRemaining {
			lastRemaining, lastProgress = remaining, now
		}
		switch {
		case progressTimeout > 0 && now.Sub(lastProgress) >= progressTimeout:
			_ = d.abortMigration(m, fmt.Sprintf("the migration made no progress for %s (progress_timeout_seconds)", progressTimeout))
			return
		case perGiB > 0 && now.Sub(start) >= acceptable:
			if cfg.GetAllowPostCopy() {
				if err := mdom.StartPostCopy(); err == nil {
					d.migs.mu.Lock()
					m.st.Mode = apiv1.MigrationModePostCopy
					d.migs.mu.Unlock()
					d.log.Info("switched the migration to post-copy", "after", now.Sub(start))
					continue
				} else {
					d.log.Warn("switching the migration to post-copy", "err", err)
				}
			}
			_ = d.abortMigration(m, fmt.Sprintf("the migration did not complete within %s (%s per GiB of %d MiB; completion_timeout_per_gib_seconds)",
				acceptable, perGiB, dataBytes>>20))
			return
		}
	}
}
