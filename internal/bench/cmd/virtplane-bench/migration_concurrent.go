package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/bench"
	"github.com/virtplane/terraform-provider-virtplane/internal/bench/virt"
)

// concurrent migrates n VMs from node A to node B at once through
// virtplane, under the cluster's default limits, and then n raw domains
// of the same XML at once, for a reference.
func (m *migEnv) concurrent(ctx context.Context, s *bench.Section, xml string, n int) error {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("conc-%03d", i)
	}
	if err := m.createOnA(ctx, names); err != nil {
		return err
	}
	vps := make([]vpMigration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i, name := range names {
		wg.Go(func() {
			<-gate
			vps[i], errs[i] = m.migrate(ctx, name, "move-"+name, m.b)
		})
	}
	close(gate)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// Before the raw domains start: the virtplane guests' CPU is not to
	// be shared with them.
	if err := m.deleteVMs(ctx, names); err != nil {
		return err
	}

	raws, rawAll, err := m.concurrentRaw(ctx, xml, n)
	if err != nil {
		return err
	}

	var walls, rawWalls []time.Duration
	first, last := vps[0].created, vps[0].seen
	for _, v := range vps {
		walls = append(walls, v.wall())
		first, last = minTime(first, v.created), maxTime(last, v.seen)
	}
	for _, r := range raws {
		rawWalls = append(rawWalls, r.Wall)
	}
	s.NewTable(fmt.Sprintf("%d live migrations created at once, node A → node B (default limits: 5 per cluster, 2 leaving a node)", n),
		"Path", "All done", "Per migration P50", "Per migration max", "Most at once")
	s.AddRow("virtplane: Create calls → every phase Succeeded seen", bench.Secs(last.Sub(first)),
		bench.Secs(bench.Percentile(walls, 50)), bench.Secs(bench.MaxDuration(walls)), fmt.Sprint(mostAtOnce(vps)))
	var rawSpans []span
	for _, r := range raws {
		rawSpans = append(rawSpans, span{r.Start, r.Start.Add(r.Wall)})
	}
	s.AddRow(fmt.Sprintf("raw libvirt: %d virDomainMigrateToURI3 calls at once", n), bench.Secs(rawAll),
		bench.Secs(bench.Percentile(rawWalls, 50)), bench.Secs(bench.MaxDuration(rawWalls)), fmt.Sprint(overlap(rawSpans)))
	migrationBreakdown(s, fmt.Sprintf("Where the %d concurrent virtplane migrations' time goes (medians)", n), vps)
	var waits []time.Duration
	for _, v := range vps {
		if sch := v.phase(apiv1.MigrationScheduling); !sch.IsZero() {
			waits = append(waits, sch.Sub(v.created))
		}
	}
	s.Note("virtplane's concurrent migrations waited %s (median; max %s) between their Create call and Scheduling: the controller lets at most 5 run in the cluster and 2 leave one node at once, and all %d leave node A; the raw calls have no limit.",
		bench.Secs(bench.Median(waits)), bench.Secs(bench.MaxDuration(waits)), n)
	s.Note("Concurrent run: %d booted VMs on node A (node B cordoned while they were placed), %d migrations to node B created from %d goroutines released together; per-migration wall time from its Create call to its phase Succeeded seen by the watch, \"all done\" from the first Create call to the last Succeeded seen. \"Most at once\" counts migrations between their phases Running and Succeeded at the same moment (phase timestamps), and for raw libvirt the calls in flight at once. The raw reference, after the virtplane VMs were deleted: %d domains of the same XML booted on node A, then %d `virDomainMigrateToURI3` calls (launcher flags) started together, each on a connection of its own opened beforehand, no limit; \"all done\" until the last returned.",
		n, n, n, n, n)
	return m.removeRaw(m.e.prefix + "-raw-")
}

// concurrentRaw boots n copies of xml on node A and migrates them to
// node B at once, each on its own connection, as n launchers would.
func (m *migEnv) concurrentRaw(ctx context.Context, xml string, n int) ([]virt.Migration, time.Duration, error) {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-raw-conc-%03d", m.e.prefix, i)
	}
	if err := m.startRaw(ctx, xml, names); err != nil {
		return nil, 0, err
	}
	conns := make([]nodeConn, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				_ = c.Close()
			}
		}
	}()
	for i := range conns {
		var err error
		if conns[i], err = openNodeLibvirt(m.a.URI); err != nil {
			return nil, 0, err
		}
	}
	out := make([]virt.Migration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range names {
		wg.Go(func() {
			<-gate
			out[i], errs[i] = conns[i].MigrateLive(names[i], m.b.TCPURI, m.b.Addr)
		})
	}
	t0 := time.Now()
	close(gate)
	wg.Wait()
	all := time.Since(t0)
	return out, all, errors.Join(errs...)
}

// span is one interval of a timeline.
type span struct{ from, to time.Time }

// mostAtOnce is the largest number of migrations between their phases
// Running and Succeeded at one moment.
func mostAtOnce(vps []vpMigration) int {
	var spans []span
	for _, v := range vps {
		r, done := v.phase(apiv1.MigrationRunning), v.phase(apiv1.MigrationSucceeded)
		if !r.IsZero() && !done.IsZero() {
			spans = append(spans, span{r, done})
		}
	}
	return overlap(spans)
}

// overlap is the largest number of spans covering one moment.
func overlap(spans []span) int {
	type edge struct {
		at time.Time
		d  int
	}
	var edges []edge
	for _, s := range spans {
		edges = append(edges, edge{s.from, 1}, edge{s.to, -1})
	}
	// Ends before starts at the same instant: back to back is not at once.
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.d - b.d
	})
	cur, most := 0, 0
	for _, e := range edges {
		cur += e.d
		most = max(most, cur)
	}
	return most
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
