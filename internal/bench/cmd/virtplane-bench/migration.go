package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/bench"
	"github.com/virtplane/terraform-provider-virtplane/internal/bench/virt"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/cluster"
)

var migrationCfg struct{ pairs, concurrent int }

var migrationBench = &measurement{
	name: "migration", id: "7-migration", title: "7. Live migration: virtplane against raw libvirt between two private libvirt hosts",
	flags: func(fs *flag.FlagSet, full bool) func() string {
		fs.IntVar(&migrationCfg.pairs, "pairs", byMode(full, 3, 10), "migrations of each path, alternating, directions alternating")
		fs.IntVar(&migrationCfg.concurrent, "concurrent", byMode(full, 4, 10), "VMs migrated at once from one node (and raw domains after them); 0 skips it")
		return func() string {
			return fmt.Sprintf("-pairs %d -concurrent %d", migrationCfg.pairs, migrationCfg.concurrent)
		}
	},
	run: runMigration,
}

// Targets of issue 21 for a live migration against raw libvirt.
const (
	targetMigrationRatio = 1.2
	// A migration's downtime is QEMU's: the launcher sets none of what
	// decides it (same flags, libvirt's default maximum downtime, no
	// bandwidth limit), so the two paths differ only by noise. 10 % of
	// the raw median covers the spread of two medians of a few samples
	// on a shared host; the 5 ms floor covers QEMU's millisecond
	// resolution when the downtime is small.
	downtimeTolerancePct   = 10
	downtimeToleranceFloor = 5 * time.Millisecond
)

func runMigration(ctx context.Context, e *env, s *bench.Section) (err error) {
	m, err := startMigEnv(ctx, e)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := m.close(); cerr != nil {
			e.log.Warn("migration teardown", "err", cerr)
			if err == nil {
				err = cerr
			}
		}
	}()
	s.Setup = []string{
		fmt.Sprintf("Two private libvirt hosts on this machine (internal/testutil/multinode: each its own libvirtd and virtlogd in its own network, mount and UTS namespace, joined by link-local addresses; %s and %s), a server (`serve --role server`) and one node agent per host (internal/testutil/cluster), the migration defaults (`--migrations-per-cluster 5 --migrations-per-node 2`, no bandwidth limit, libvirt's default maximum downtime).", m.a.Name, m.b.Name),
		fmt.Sprintf("VM: the test guest (direct kernel boot), %s, 1 vCPU, no disk, no NIC, TCG; booted (its console's %q marker) before it migrates. Kernel, initrd and console logs are under /tmp, which both hosts see at the same path (shared storage: no disk is copied).", guestMemory, "VIRTPLANE-GUEST-BOOTED"),
		"virtplane: a VirtualMachineInstanceMigration created through the API with the target node as its added node selector; wall time from the Create call to the migration's phase Succeeded as seen by an API watch. libvirt job and downtime are the migration status' progress (`elapsed_ms`, `downtime_ms`: libvirt's completed job statistics on the source, QEMU's downtime).",
		"Raw libvirt: the virtplane domain's inactive XML on node A, renamed, UUID and metadata dropped, console log moved, defined and started on node A's libvirtd directly and booted; then `virDomainMigrateToURI3` from the benchmark to the other node's TCP URI with the launcher's flags (LIVE | PEER2PEER | PERSIST_DEST, the source left defined) and parameters (migrate URI tcp://<target address>, listen address = target address; no bandwidth, no destination XML since the paths are the same). Wall time is the call; job time and downtime from `virDomainGetJobStats(COMPLETED)` on the source afterwards.",
		"Pairs: one warm-up migration of each path A → B (not counted), then the paths alternate, both migrations of a pair in the same direction, the direction alternating (B → A, A → B, ...) and which path goes first alternating too (virtplane first in even pairs, raw first in odd ones).",
	}

	mover := "mover"
	if err := m.createOnA(ctx, []string{mover}); err != nil {
		return err
	}
	xml, err := m.lv[m.a].InactiveXML(apiv1.DomainName(m.ns, mover))
	if err != nil {
		return err
	}
	rawName := e.prefix + "-raw-mover"
	if err := m.startRaw(ctx, xml, []string{rawName}); err != nil {
		return err
	}
	// Warm-up: the first migration between two libvirtds opens their
	// peer connection and starts a target QEMU from a cold cache.
	if _, err := m.migrate(ctx, mover, "warmup", m.b); err != nil {
		return err
	}
	if _, err := m.lv[m.a].MigrateLive(rawName, m.b.TCPURI, m.b.Addr); err != nil {
		return err
	}
	var vps []vpMigration
	var raws []virt.Migration
	from := m.b
	for i := range migrationCfg.pairs {
		to := m.other(from)
		var v vpMigration
		var r virt.Migration
		vp := func() (err error) { v, err = m.migrate(ctx, mover, fmt.Sprintf("pair-%03d", i), to); return err }
		raw := func() (err error) { r, err = m.lv[from].MigrateLive(rawName, to.TCPURI, to.Addr); return err }
		// Which path goes first alternates too: what one migration
		// leaves behind (the source QEMU exiting) weighs on the next.
		first, second := vp, raw
		if i%2 == 1 {
			first, second = raw, vp
		}
		if err := first(); err != nil {
			return err
		}
		if err := second(); err != nil {
			return err
		}
		vps, raws = append(vps, v), append(raws, r)
		e.log.Info("migration pair", "i", i, "from", from.Name, "to", to.Name, "virtplane", v.wall(), "virtplane_downtime", v.downtime(),
			"raw", r.Wall, "raw_downtime", r.Downtime)
		from = to
	}
	pairTables(s, vps, raws)
	if err := m.deleteVMs(ctx, []string{mover}); err != nil {
		return err
	}
	if err := m.removeRaw(e.prefix + "-raw-"); err != nil {
		return err
	}
	if migrationCfg.concurrent > 0 {
		return m.concurrent(ctx, s, xml, migrationCfg.concurrent)
	}
	return nil
}

// pairTables reports the alternating pairs, the targets, and where a
// virtplane migration's time goes.
func pairTables(s *bench.Section, vps []vpMigration, raws []virt.Migration) {
	var vWall, vCall, vJob, vDown, rWall, rJob, rDown []time.Duration
	for _, v := range vps {
		vWall, vJob, vDown = append(vWall, v.wall()), append(vJob, v.job()), append(vDown, v.downtime())
		if d := v.call(); d > 0 {
			vCall = append(vCall, d)
		}
	}
	for _, r := range raws {
		rWall, rJob, rDown = append(rWall, r.Wall), append(rJob, r.Elapsed), append(rDown, r.Downtime)
	}
	s.NewTable(fmt.Sprintf("One live migration of a booted test guest, %d alternating pairs", len(vps)), "Path", "Median", "Min", "Max", "n")
	row := func(what string, ds []time.Duration) {
		s.AddRow(what, bench.Secs(bench.Median(ds)), bench.Secs(bench.MinDuration(ds)), bench.Secs(bench.MaxDuration(ds)), fmt.Sprint(len(ds)))
	}
	row("virtplane: API Create → phase Succeeded seen by the watch", vWall)
	row("virtplane: the source launcher's migrate call (status start → end timestamps)", vCall)
	row("virtplane: libvirt job (status elapsed_ms)", vJob)
	row("virtplane: guest downtime (status downtime_ms)", vDown)
	row("raw libvirt: virDomainMigrateToURI3 call", rWall)
	row("raw libvirt: libvirt job (completed job time_elapsed)", rJob)
	row("raw libvirt: guest downtime (completed job downtime)", rDown)

	mvw, mrw, mvd, mrd := bench.Median(vWall), bench.Median(rWall), bench.Median(vDown), bench.Median(rDown)
	s.NewTable("virtplane against raw libvirt (medians, same run)", "Comparison", "virtplane", "raw", "Difference", "Ratio")
	s.AddRow("wall time (API Create → Succeeded seen, against the raw call)", bench.Secs(mvw), bench.Secs(mrw), bench.Secs(mvw-mrw), bench.Ratio(mvw, mrw))
	mvc := bench.Median(vCall)
	s.AddRow("libvirt migrate call alone (the source launcher's job start → end, against the raw call)", bench.Secs(mvc), bench.Secs(mrw), bench.Secs(mvc-mrw), bench.Ratio(mvc, mrw))
	s.AddRow("libvirt job", bench.Secs(bench.Median(vJob)), bench.Secs(bench.Median(rJob)), bench.Secs(bench.Median(vJob)-bench.Median(rJob)), bench.Ratio(bench.Median(vJob), bench.Median(rJob)))
	s.AddRow("downtime", bench.Secs(mvd), bench.Secs(mrd), bench.Secs(mvd-mrd), bench.Ratio(mvd, mrd))

	ratio := 0.0
	if mrw > 0 {
		ratio = float64(mvw) / float64(mrw)
	}
	s.Target("live migration wall time vs raw (medians)", fmt.Sprintf("≤ %.1f×", targetMigrationRatio),
		fmt.Sprintf("%s (%s vs %s)", bench.Ratio(mvw, mrw), bench.Secs(mvw), bench.Secs(mrw)), mrw > 0 && ratio <= targetMigrationRatio)
	tol := max(downtimeToleranceFloor, mrd*downtimeTolerancePct/100)
	s.Target("guest downtime vs raw (medians)", fmt.Sprintf("equal: ≤ raw + max(%d %%, %s)", downtimeTolerancePct, downtimeToleranceFloor),
		fmt.Sprintf("%d ms vs %d ms (allowed ≤ %d ms)", mvd.Milliseconds(), mrd.Milliseconds(), (mrd+tol).Milliseconds()), mvd <= mrd+tol)
	s.Note("Downtime target: \"equal\" is met when virtplane's median is at most the raw median plus the larger of %d %% of it and %s. Both paths' downtime is QEMU's switch-over for the same guest with the same flags and libvirt's default maximum downtime (the launcher sets none of what decides it), so they differ by noise only: the %d %% covers two medians of a few samples on a shared host, the %s floor QEMU's millisecond resolution when downtimes are a few ms. Samples of one path spread from %s to %s (virtplane) and %s to %s (raw).",
		downtimeTolerancePct, downtimeToleranceFloor, downtimeTolerancePct, downtimeToleranceFloor,
		bench.Secs(bench.MinDuration(vDown)), bench.Secs(bench.MaxDuration(vDown)), bench.Secs(bench.MinDuration(rDown)), bench.Secs(bench.MaxDuration(rDown)))
	migrationBreakdown(s, "Where a virtplane migration goes (medians; the migration's phase timestamps and its libvirt job's start and end as the source recorded them)", vps)
	if mrw > 0 && ratio > targetMigrationRatio {
		s.Note("The wall-time target is missed: the libvirt job itself is about the raw call's; the steps above before the job (placement, the target launcher and its receiving domain, the hand-over to the source) and after it (the status round trip) are virtplane's share.")
	}
	s.Note("On both paths most of a migration is libvirt's migrate call but outside the job time libvirt reports (time_elapsed of the completed job): the raw call minus its job time is %s (median), the launcher's call minus its job time %s. The call also opens the peer connection, starts the target QEMU and finishes on both sides; which of these takes the time is not measured here. The launcher's start and end timestamps bracket its virDomainMigrateToURI3 call (launcher/internal/driver/migrate.go).",
		bench.Secs(bench.Median(rWall)-bench.Median(rJob)), bench.Secs(mvc-bench.Median(vJob)))
}

// step is one segment of a migration's timeline.
type step struct {
	what     string
	from, to func(vpMigration) time.Time
}

// migrationBreakdown splits virtplane migrations at their phase
// timestamps and their libvirt job's start and end.
func migrationBreakdown(s *bench.Section, title string, vps []vpMigration) {
	s.NewTable(title, "Step", "Median", "Max", "n")
	for _, st := range migrationSteps() {
		ds := st.durations(vps)
		s.AddRow(st.what, bench.Secs(bench.Median(ds)), bench.Secs(bench.MaxDuration(ds)), fmt.Sprint(len(ds)))
	}
}

// durations is the step's length in each migration that has both ends.
func (st step) durations(vps []vpMigration) []time.Duration {
	var ds []time.Duration
	for _, v := range vps {
		a, b := st.from(v), st.to(v)
		if !a.IsZero() && !b.IsZero() {
			ds = append(ds, b.Sub(a))
		}
	}
	return ds
}

// migrationSteps are a virtplane migration's steps, from the Create call
// to the watch seeing it Succeeded.
func migrationSteps() []step {
	ph := func(p string) func(vpMigration) time.Time { return func(v vpMigration) time.Time { return v.phase(p) } }
	created := func(v vpMigration) time.Time { return v.created }
	seen := func(v vpMigration) time.Time { return v.seen }
	jobStart := func(v vpMigration) time.Time {
		return tsTime(v.final.GetStatus().GetMigrationState().GetStartTimestamp().AsTime())
	}
	jobEnd := func(v vpMigration) time.Time {
		return tsTime(v.final.GetStatus().GetMigrationState().GetEndTimestamp().AsTime())
	}
	return []step{
		{"API Create call → Scheduling (API write, migration controller picks it up; waits here for the limits)", created, ph(apiv1.MigrationScheduling)},
		{"Scheduling → Scheduled (target node chosen)", ph(apiv1.MigrationScheduling), ph(apiv1.MigrationScheduled)},
		{"Scheduled → PreparingTarget (target node agent picks it up)", ph(apiv1.MigrationScheduled), ph(apiv1.MigrationPreparingTarget)},
		{"PreparingTarget → TargetReady (target launcher started, receiving domain defined, target XML published)", ph(apiv1.MigrationPreparingTarget), ph(apiv1.MigrationTargetReady)},
		{"TargetReady → libvirt job started (source node agent → source launcher's Migrate)", ph(apiv1.MigrationTargetReady), jobStart},
		{"libvirt migrate call (source launcher's job start → end timestamps)", jobStart, jobEnd},
		{"job end → Succeeded (source reports, target takes over, controller finishes)", jobEnd, ph(apiv1.MigrationSucceeded)},
		{"Succeeded → seen by the client's watch", ph(apiv1.MigrationSucceeded), seen},
	}
}

// tsTime is the zero time for an unset timestamp (AsTime of nil is 1970).
func tsTime(t time.Time) time.Time {
	if t.Unix() <= 0 {
		return time.Time{}
	}
	return t
}

// startRaw defines and starts copies of the virtplane domain XML x on
// node A under names, and waits until their guests booted.
func (m *migEnv) startRaw(ctx context.Context, x string, names []string) error {
	for _, name := range names {
		cx, err := virt.Clone(x, name, m.dir+"/"+name+".log")
		if err != nil {
			return err
		}
		if _, _, err := m.lv[m.a].DefineAndStart(cx); err != nil {
			return fmt.Errorf("raw domain %s on %s: %w", name, m.a.Name, err)
		}
	}
	return m.waitBooted(ctx, m.a, names)
}

// removeRaw removes the raw domains (prefix) from both hosts.
func (m *migEnv) removeRaw(prefix string) error {
	for _, n := range []*cluster.Node{m.a, m.b} {
		if _, err := m.lv[n].RemoveAll(prefix); err != nil {
			return err
		}
	}
	return nil
}
