package command

import (
	"time"

	"github.com/spf13/pflag"

	migctl "github.com/virtplane/terraform-provider-virtplane/internal/controller/migration"
)

// addMigrationFlags are the cluster's migration settings, with KubeVirt's
// defaults (docs/migration.md).
func addMigrationFlags(f *pflag.FlagSet, o *migctl.Options) {
	f.IntVar(&o.ParallelMigrationsPerCluster, "migrations-per-cluster", 5, "live migrations that may run at once in the cluster")
	f.IntVar(&o.ParallelOutboundMigrationsPerNode, "migrations-per-node", 2, "live migrations that may leave one node at once")
	f.Int64Var(&o.BandwidthMiBPerSecond, "migration-bandwidth", 0, "MiB/s each migration's stream may use; 0 is unlimited")
	f.DurationVar(&o.CompletionTimeoutPerGiB, "migration-completion-timeout-per-gib", 150*time.Second, "a migration is aborted when it runs longer than this per GiB of memory and disks to move")
	f.DurationVar(&o.ProgressTimeout, "migration-progress-timeout", 150*time.Second, "a migration is aborted when the data left did not shrink for this long")
	f.DurationVar(&o.MaxDowntime, "migration-max-downtime", 0, "guest downtime a migration may take to switch over; 0 keeps libvirt's 300ms")
	f.BoolVar(&o.AllowAutoConverge, "migration-auto-converge", false, "slow a guest's vCPUs when its memory changes faster than the stream moves it")
	f.BoolVar(&o.AllowPostCopy, "migration-post-copy", false, "switch a migration that runs past its completion timeout to post-copy (the guest runs on the target while its memory follows; a network failure then loses the guest)")
	f.BoolVar(&o.TLS, "migration-tls", false, "encrypt QEMU's migration streams (libvirt's migrate_tls: every node needs libvirt's TLS certificates)")
	f.DurationVar(&o.UnschedulableTimeout, "migration-unschedulable-timeout", 5*time.Minute, "a migration whose target fits on no node fails after this long")
	f.DurationVar(&o.TargetTimeout, "migration-target-timeout", 15*time.Minute, "a migration whose target is not ready this long after it was chosen fails")
}
