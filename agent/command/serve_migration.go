package command

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/virtplane/terraform-provider-virtplane/internal/api/migrationdest"
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
	addMigrationDestinationFlags(f, &o.Destinations)
}

// addMigrationDestinationFlags are how sources reach targets: the server
// builds every migration's destination from the target node's registered
// --migration-address with these (package migrationdest).
func addMigrationDestinationFlags(f *pflag.FlagSet, p *migrationdest.Policy) {
	f.StringVar(&p.Transport, "migration-transport", migrationdest.TransportTLS,
		"how a migration's source libvirtd reaches the target's: tls (libvirt's TLS certificates on every node) or tcp (no authentication: a private migration network only)")
	f.IntVar(&p.Port, "migration-libvirt-port", 0,
		fmt.Sprintf("the port the nodes' libvirtds listen on for migrations; 0: %d for tls, %d for tcp", migrationdest.DefaultPortTLS, migrationdest.DefaultPortTCP))
	f.Var((*prefixes)(&p.Networks), "migration-networks",
		"networks (CIDR,...) the nodes' --migration-address must be in; empty: any unicast address but loopback")
}
