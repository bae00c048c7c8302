package command

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// Progress lines say bytes done of the total, the rate from the node's
// time stamps, and the time left.
func TestBackupProgressLine(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	m := &rateMeter{}
	p := func(done int64, at time.Duration) *apiv1.BackupProgress {
		return &apiv1.BackupProgress{BytesDone: done, BytesTotal: 100 << 20, Updated: timestamppb.New(t0.Add(at))}
	}
	if got := m.describe(p(0, 0)); got != "0 of 100Mi (0%)" {
		t.Fatalf("first report: %q", got)
	}
	if got := m.describe(p(20<<20, 2*time.Second)); got != "20Mi of 100Mi (20%) at 10Mi/s, ETA 8s" {
		t.Fatalf("second report: %q", got)
	}
	// The same report again (a status write of something else) changes
	// nothing.
	if got := m.describe(p(20<<20, 2*time.Second)); !strings.Contains(got, "10Mi/s") {
		t.Fatalf("repeated report: %q", got)
	}
}

func TestBackupLinesAndOutcome(t *testing.T) {
	b := &apiv1.VirtualMachineBackup{
		Metadata: &apiv1.ObjectMeta{Name: "db-1"},
		Spec:     &apiv1.VirtualMachineBackupSpec{Source: "db", Target: "nfs"},
		Status: &apiv1.VirtualMachineBackupStatus{Phase: apiv1.BackupSucceeded, ManifestId: "6f1c2a3e-0000-4000-8000-000000000001",
			Volumes: []*apiv1.BackupVolumeStatus{{Name: "data", ClassKind: "rbd", SizeBytes: 1 << 30, BytesRead: 8 << 20, BytesWritten: 3 << 20, Incremental: true}}},
	}
	var out strings.Builder
	if err := backupOutcome(&out, b); err != nil {
		t.Fatal(err)
	}
	if want := "volume data (rbd, incremental): 1Gi, read 8Mi, wrote 3Mi"; !strings.Contains(out.String(), want) {
		t.Fatalf("outcome %q lacks %q", out.String(), want)
	}
	b.Status = &apiv1.VirtualMachineBackupStatus{Phase: apiv1.BackupFailed, Error: "upload failed: boom"}
	if err := backupOutcome(&out, b); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("failed outcome: %v", err)
	}
}
