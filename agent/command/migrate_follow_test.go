package command

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func viewMigration(phase string, progress *apiv1.MigrationProgress) *apiv1.VirtualMachineInstanceMigration {
	m := testMigration("default", "demo-migration-abcde", "demo", phase)
	if progress != nil {
		m.Status.TargetNode = "node-b"
		m.Status.MigrationState = &apiv1.MigrationState{SourceNode: "node-a", TargetNode: "node-b", Progress: progress}
	}
	return m
}

func progressOf(remainingMiB int64, mibPerSecond int64) *apiv1.MigrationProgress {
	return &apiv1.MigrationProgress{DataTotalBytes: 1 << 30, DataRemainingBytes: remainingMiB << 20,
		DataProcessedBytes: 1<<30 - remainingMiB<<20, MemoryBytesPerSecond: mibPerSecond << 20}
}

// On a terminal the progress is one line redrawn in place; a phase
// change replaces it and starts a line of its own.
func TestMigrationViewTerminal(t *testing.T) {
	var b bytes.Buffer
	v := newMigrationView(&b, true, func() time.Time { return testNow })
	for _, m := range []*apiv1.VirtualMachineInstanceMigration{
		viewMigration(apiv1.MigrationScheduling, nil),
		viewMigration(apiv1.MigrationRunning, progressOf(768, 40)),
		viewMigration(apiv1.MigrationRunning, progressOf(768, 40)), // unchanged: nothing drawn
		viewMigration(apiv1.MigrationRunning, progressOf(256, 52)),
		viewMigration(apiv1.MigrationSucceeded, progressOf(0, 0)),
	} {
		if err := v.show(m); err != nil {
			t.Fatal(err)
		}
	}
	v.finish()
	want := "Scheduling\n" +
		"Running: node-a -> node-b\n" +
		"\r\x1b[2K  768.0 MiB of 1.0 GiB remaining (25% sent), 40.0 MiB/s" +
		"\r\x1b[2K  256.0 MiB of 1.0 GiB remaining (75% sent), 52.0 MiB/s" +
		"\r\x1b[2KSucceeded: node-a -> node-b\n" +
		"\r\x1b[2K  0 B of 1.0 GiB remaining (100% sent)\n"
	if b.String() != want {
		t.Errorf("terminal view:\n%q\nwant:\n%q", b.String(), want)
	}
}

// Elsewhere (a log) progress is printed at most every plainInterval,
// phases always.
func TestMigrationViewPlainIsRateLimited(t *testing.T) {
	var b bytes.Buffer
	now := testNow
	v := newMigrationView(&b, false, func() time.Time { return now })
	step := func(d time.Duration, m *apiv1.VirtualMachineInstanceMigration) {
		t.Helper()
		now = now.Add(d)
		if err := v.show(m); err != nil {
			t.Fatal(err)
		}
	}
	step(0, viewMigration(apiv1.MigrationRunning, progressOf(900, 10)))
	step(time.Second, viewMigration(apiv1.MigrationRunning, progressOf(800, 10)))   // too soon
	step(4*time.Second, viewMigration(apiv1.MigrationRunning, progressOf(700, 10))) // 5s after the printed one
	step(time.Second, viewMigration(apiv1.MigrationFailed, progressOf(690, 10)))    // a new phase: printed at once
	v.finish()
	want := "Running: node-a -> node-b\n" +
		"  900.0 MiB of 1.0 GiB remaining (12% sent), 10.0 MiB/s\n" +
		"  700.0 MiB of 1.0 GiB remaining (31% sent), 10.0 MiB/s\n" +
		"Failed: node-a -> node-b\n" +
		"  690.0 MiB of 1.0 GiB remaining (32% sent), 10.0 MiB/s\n"
	if b.String() != want {
		t.Errorf("plain view:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestMigrationRow(t *testing.T) {
	over := viewMigration(apiv1.MigrationRunning, &apiv1.MigrationProgress{DataTotalBytes: 100, DataProcessedBytes: 130})
	onlyState := testMigration("prod", "x", "vm", apiv1.MigrationPreparingTarget)
	onlyState.Status.MigrationState = &apiv1.MigrationState{SourceNode: "node-a", TargetNode: "node-c"}
	for _, tt := range []struct {
		name string
		m    *apiv1.VirtualMachineInstanceMigration
		want []string
	}{
		{"new", &apiv1.VirtualMachineInstanceMigration{Metadata: &apiv1.ObjectMeta{Name: "n"}}, []string{"n", "<none>", "Pending", "<none>", "<none>", "<none>", "<unknown>"}},
		// Dirty pages sent again push processed past the first total.
		{"over 100%", over, []string{"demo-migration-abcde", "demo", "Running", "node-a", "node-b", "100%", "0s"}},
		{"target from the state", onlyState, []string{"x", "vm", "PreparingTarget", "node-a", "node-c", "<none>", "0s"}},
	} {
		now := testNow
		if ts := tt.m.GetMetadata().GetCreationTimestamp(); ts != nil {
			now = ts.AsTime()
		}
		if got := migrationRow(tt.m, now); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := tableRow(migrationResource, onlyState, onlyState.Metadata.CreationTimestamp.AsTime(), true); got[0] != "prod" || len(got) != 8 {
		t.Errorf("-A row %q", got)
	}
}
