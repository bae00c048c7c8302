package command

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// defaultBackupWaitTimeout bounds backup create/restore --wait: a backup
// reads every volume, which takes longer than a snapshot.
const defaultBackupWaitTimeout = time.Hour

func newBackupCommand(root *rootOptions, clk clock.Clock) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "Back up virtual machines to a backup target, list and restore backups",
		Long: `Backups of virtual machines to a BackupTarget (a directory on a mounted
filesystem, or an S3 bucket): the VM's spec and its persistent volumes,
taken at a consistent point (a snapshot, guest agent freeze) and uploaded
by one node; incremental after the first (an RBD diff for rbd volumes,
chunk dedup for local ones), compressed and checksummed. A backup is
restored into a new VM on any node, also of another cluster whose target
points at the same place. Schedules (VirtualMachineBackupSchedule) are
applied as manifests (apply -f). docs/backups.md describes the flow.`,
		Example: `  virtplane-agent backup create db --target nfs --wait
  virtplane-agent backup list
  virtplane-agent backup list --target nfs
  virtplane-agent backup restore 4b0c...-e1 --target nfs --to db-copy --wait
  virtplane-agent backup delete db-20250102030405`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(
		newBackupCreateCommand(root, clk),
		newBackupListCommand(root),
		newBackupRestoreCommand(root, clk),
		newBackupDeleteCommand(root),
	)
	return cmd
}

type backupCreateOptions struct {
	*rootOptions
	target, name, deletionPolicy string
	wait                         bool
	timeout                      time.Duration
	clock                        clock.Clock
}

func newBackupCreateCommand(root *rootOptions, clk clock.Clock) *cobra.Command {
	o := &backupCreateOptions{rootOptions: root, clock: clk}
	cmd := &cobra.Command{
		Use:   "create VM --target TARGET",
		Short: "Back up a virtual machine",
		Long: `Back up VM to TARGET, named --name or <VM>-<UTC yyyymmddhhmmss>.

With --wait the command prints the backup's phases and its upload's
progress (bytes, rate, time left) and returns when it ended: 0 when it
succeeded (with what each volume cost), an error with the reason when it
failed. Without it, it returns once the backup is created.`,
		Example: `  virtplane-agent backup create db --target nfs --wait
  virtplane-agent backup create db --target s3 --name before-upgrade --deletion-policy Delete`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.target, "target", "", "the BackupTarget to back up to (required)")
	f.StringVar(&o.name, "name", "", "the backup's name (default <VM>-<UTC yyyymmddhhmmss>)")
	f.StringVar(&o.deletionPolicy, "deletion-policy", "", "what deleting the backup does with its data: Retain (the default: it stays in the target) or Delete")
	f.BoolVar(&o.wait, "wait", false, "show the backup's progress and wait until it ends")
	f.DurationVar(&o.timeout, "timeout", defaultBackupWaitTimeout, "how long --wait waits (the backup keeps going after it)")
	return cmd
}

func (o *backupCreateOptions) run(ctx context.Context, out, errOut io.Writer, vm string) error {
	if o.target == "" {
		return fmt.Errorf("--target is required: the BackupTarget to back up to (get backuptargets lists them)")
	}
	switch o.deletionPolicy {
	case "", apiv1.DeletionPolicyRetain, apiv1.DeletionPolicyDelete:
	default:
		return fmt.Errorf("--deletion-policy %q: want %s or %s", o.deletionPolicy, apiv1.DeletionPolicyRetain, apiv1.DeletionPolicyDelete)
	}
	if o.wait {
		if err := checkWaitTimeout(o.timeout); err != nil {
			return err
		}
	}
	name := o.name
	if name == "" {
		name = vm + "-" + stamp(o.clock.Now())
	}
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	b, err := c.Backups.Create(ctx, &apiv1.CreateBackupRequest{Backup: &apiv1.VirtualMachineBackup{
		Metadata: &apiv1.ObjectMeta{Namespace: o.namespace, Name: name},
		Spec:     &apiv1.VirtualMachineBackupSpec{Source: vm, Target: o.target, DeletionPolicy: o.deletionPolicy},
	}})
	if err != nil {
		return describeError(err, backupResource, name)
	}
	if _, err := fmt.Fprintf(out, "backup %s of VM %s to target %s created\n", name, vm, o.target); err != nil || !o.wait {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rate := &rateMeter{}
	last, err := backupFollower(c, o.clock, name).wait(wctx, b, newLineView(errOut, func(b *apiv1.VirtualMachineBackup) []followLine {
		return backupLines(b, rate)
	}).show)
	if err != nil {
		return waitFailure(ctx, wctx, err, o.timeout, backupResource, name, backupPhase(last.GetStatus().GetPhase()), "virtplane-agent get vmbackup "+name+" -w")
	}
	return backupOutcome(out, last)
}

func backupFollower(c *client.Client, clk clock.Clock, name string) follower[*apiv1.VirtualMachineBackup, *apiv1.BackupEvent] {
	return follower[*apiv1.VirtualMachineBackup, *apiv1.BackupEvent]{
		what: "backup " + name,
		open: func(ctx context.Context, opts *apiv1.WatchOptions) (client.Stream[*apiv1.BackupEvent], error) {
			return c.Backups.Watch(ctx, &apiv1.WatchBackupsRequest{Options: opts})
		},
		done: func(b *apiv1.VirtualMachineBackup) bool {
			return apiv1.BackupFinal(b.GetStatus().GetPhase()) || b.GetMetadata().GetDeletionTimestamp() != nil
		},
		phase: func(b *apiv1.VirtualMachineBackup) string { return backupPhase(b.GetStatus().GetPhase()) },
		clock: clk,
	}
}

// backupLines describes a backup for --wait: its phase (with what it
// waits for), its node and base, and the upload's progress.
func backupLines(b *apiv1.VirtualMachineBackup, rate *rateMeter) []followLine {
	st := b.GetStatus()
	phase := backupPhase(st.GetPhase())
	if !apiv1.BackupFinal(st.GetPhase()) {
		phase += conditionNote(st.GetConditions(), "Progressing")
	}
	lines := []followLine{{key: "phase", text: phase}}
	if n := st.GetNodeName(); n != "" {
		lines = append(lines, followLine{key: "node", text: "  node: " + n})
	}
	if base := st.GetBaseBackup(); base != "" {
		lines = append(lines, followLine{key: "base", text: "  incremental to backup " + base})
	}
	if p := st.GetProgress(); p != nil && st.GetPhase() == apiv1.BackupInProgress {
		lines = append(lines, followLine{key: "progress", text: "  " + rate.describe(p)})
	}
	return lines
}

// rateMeter turns successive progress reports into a rate and the time
// left, from the times the node stamped them with.
type rateMeter struct {
	done int64
	at   time.Time
	rate float64 // bytes per second, smoothed
}

// describe is "42Mi of 128Mi (32%) at 12.5Mi/s, ETA 7s" (transferText).
func (m *rateMeter) describe(p *apiv1.BackupProgress) string {
	done, total := p.GetBytesDone(), p.GetBytesTotal()
	at := p.GetUpdated().AsTime()
	if !m.at.IsZero() && at.After(m.at) && done >= m.done {
		r := float64(done-m.done) / at.Sub(m.at).Seconds()
		if m.rate == 0 {
			m.rate = r
		} else {
			m.rate = 0.5*m.rate + 0.5*r
		}
	}
	if m.at.IsZero() || at.After(m.at) {
		m.done, m.at = done, at
	}
	return transferText(done, total, m.rate, true)
}

// backupOutcome reports a backup that ended: nil when it succeeded, with
// what each volume cost, else an error with the reason.
func backupOutcome(out io.Writer, b *apiv1.VirtualMachineBackup) error {
	name, vm := b.GetMetadata().GetName(), b.GetSpec().GetSource()
	st := b.GetStatus()
	switch st.GetPhase() {
	case apiv1.BackupSucceeded:
		if _, err := fmt.Fprintf(out, "backup %s of VM %s succeeded: id %s in target %s\n", name, vm, st.GetManifestId(), b.GetSpec().GetTarget()); err != nil {
			return err
		}
		for _, v := range st.GetVolumes() {
			kind := "full"
			if v.GetIncremental() {
				kind = "incremental"
			}
			if _, err := fmt.Fprintf(out, "  volume %s (%s, %s): %s, read %s, wrote %s\n", v.GetName(), v.GetClassKind(), kind,
				formatBytes(v.GetSizeBytes()), formatBytes(v.GetBytesRead()), formatBytes(v.GetBytesWritten())); err != nil {
				return err
			}
		}
		return nil
	case apiv1.BackupFailed:
		reason := st.GetError()
		if reason == "" {
			reason = "no reason given"
		}
		return fmt.Errorf("backup %s of VM %s failed: %s", name, vm, reason)
	}
	return fmt.Errorf("backup %s of VM %s is being deleted (phase %s)", name, vm, backupPhase(st.GetPhase()))
}

type backupListOptions struct {
	*rootOptions
	target        string
	output        string
	allNamespaces bool
	now           func() time.Time
}

func newBackupListCommand(root *rootOptions) *cobra.Command {
	o := &backupListOptions{rootOptions: root, now: time.Now}
	cmd := &cobra.Command{
		Use:     "list [VM]",
		Aliases: []string{"ls"},
		Short:   "List backups: the objects, or what a target holds (--target)",
		Long: `Without --target, list the VirtualMachineBackup objects (of VM, when given).
With --target, list what the target holds, read by the server from its
manifests: also backups another cluster wrote, and those whose object was
deleted with deletion_policy Retain. The ID is what ` + "`backup restore`" + ` takes.`,
		Example: `  virtplane-agent backup list
  virtplane-agent backup list db --target nfs`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			vm := ""
			if len(args) == 1 {
				vm = args[0]
			}
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), vm)
		},
	}
	cmd.Flags().StringVar(&o.target, "target", "", "list what this BackupTarget holds instead of the backup objects")
	cmd.Flags().StringVarP(&o.output, "output", "o", formatTable, "output format: table, wide, json or yaml")
	cmd.Flags().BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list backups of all namespaces")
	return cmd
}

func (o *backupListOptions) run(ctx context.Context, out, errOut io.Writer, vm string) error {
	wide := o.output == formatWide
	if !wide && checkFormat(o.output) != nil {
		return fmt.Errorf("unsupported output format %q (want table, wide, json or yaml)", o.output)
	}
	if o.target != "" {
		return o.withClient(ctx, func(c *client.Client) error { return o.listTarget(ctx, c, out, errOut, vm) })
	}
	namespace := o.namespace
	if o.allNamespaces {
		namespace = ""
	}
	return o.withClient(ctx, func(c *client.Client) error {
		items, err := listObjects(ctx, c, backupResource, namespace, "")
		if err != nil {
			return describeError(err, nil, "")
		}
		if vm != "" {
			items = slices.DeleteFunc(items, func(it object) bool { return it.(*apiv1.VirtualMachineBackup).GetSpec().GetSource() != vm })
		}
		if !wide && o.output != formatTable {
			return printList(out, o.output, items)
		}
		if len(items) == 0 {
			_, err := fmt.Fprintln(errOut, noResources(namespace))
			return err
		}
		header := tableHeader(backupResource, o.allNamespaces)
		if wide {
			header = append(header, wideHeader(backupResource)...)
		}
		now := o.now()
		rows := make([][]string, len(items))
		for i, it := range items {
			rows[i] = tableRow(backupResource, it, now, o.allNamespaces)
			if wide {
				rows[i] = append(rows[i], wideCells(backupResource, it)...)
			}
		}
		return printTable(out, header, rows)
	})
}

// listTarget lists what the target holds.
func (o *backupListOptions) listTarget(ctx context.Context, c *client.Client, out, errOut io.Writer, vm string) error {
	resp, err := c.BackupTargets.ListManifests(ctx, &apiv1.ListBackupManifestsRequest{Name: o.target, VmName: vm})
	if err != nil {
		return describeError(err, backupTargetResource, o.target)
	}
	items := resp.GetItems()
	if o.output == formatJSON || o.output == formatYAML {
		j, err := protojson.Marshal(resp)
		if err != nil {
			return err
		}
		return writeJSONAs(out, o.output, j)
	}
	if len(items) == 0 {
		_, err := fmt.Fprintf(errOut, "No backups found in target %s.\n", o.target)
		return err
	}
	now := o.now()
	header := []string{"ID", "CLUSTER", "VM", "CREATED", "SIZE", "DATA", "VOLUMES", "AGE"}
	rows := make([][]string, len(items))
	for i, m := range items {
		rows[i] = []string{
			m.GetId(), cell(m.GetCluster()), apiv1.Ref(m.GetVmNamespace(), m.GetVmName()), timestampCell(m.GetCreated()),
			formatBytes(m.GetSizeBytes()), formatBytes(m.GetDataBytes()), strconv.Itoa(int(m.GetVolumes())), age(m.GetCreated(), now),
		}
	}
	return printTable(out, header, rows)
}

type backupRestoreOptions struct {
	*rootOptions
	target, to, node, name string
	newIdentity            bool
	macs                   map[string]string
	wait                   bool
	timeout                time.Duration
	clock                  clock.Clock
}

func newBackupRestoreCommand(root *rootOptions, clk clock.Clock) *cobra.Command {
	o := &backupRestoreOptions{rootOptions: root, clock: clk}
	cmd := &cobra.Command{
		Use:   "restore ID --target TARGET --to NEWVM",
		Short: "Restore a backup into a new virtual machine",
		Long: `Restore backup ID (backup list --target TARGET lists them) into a new VM
named NEWVM, halted, on --node or a Ready node the target and the volumes'
storage classes select. The backup carries the VM's spec: a backup another
cluster wrote is restored the same way (its storage classes must exist
here by the same names). --new-identity gives the VM new MAC addresses (or
those of --mac) so that it can run beside the backed up VM.`,
		Example: `  virtplane-agent backup restore 4b0c...-e1 --target nfs --to db-copy --wait
  virtplane-agent backup restore 4b0c...-e1 --target s3 --to db --node node-b --new-identity --mac default=02:00:00:00:00:10`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.target, "target", "", "the BackupTarget that holds the backup (required)")
	f.StringVar(&o.to, "to", "", "the new VM's name (required)")
	f.StringVar(&o.node, "node", "", "the node that writes the volumes (and keeps the local ones)")
	f.StringVar(&o.name, "name", "", "the restore's name (default <NEWVM>-restore-<UTC yyyymmddhhmmss>)")
	f.BoolVar(&o.newIdentity, "new-identity", false, "give the new VM new MAC addresses")
	f.StringToStringVar(&o.macs, "mac", nil, "with --new-identity: INTERFACE=MAC for the new VM, repeatable; other interfaces get new addresses")
	f.BoolVar(&o.wait, "wait", false, "show the restore's progress and wait until it ends")
	f.DurationVar(&o.timeout, "timeout", defaultBackupWaitTimeout, "how long --wait waits (the restore keeps going after it)")
	return cmd
}

func (o *backupRestoreOptions) run(ctx context.Context, out, errOut io.Writer, id string) error {
	switch {
	case o.target == "":
		return fmt.Errorf("--target is required: the BackupTarget that holds the backup")
	case o.to == "":
		return fmt.Errorf("--to is required: the new VM's name")
	}
	if len(o.macs) > 0 && !o.newIdentity {
		return fmt.Errorf("--mac is for --new-identity: without it the VM keeps the backup's MAC addresses")
	}
	if err := checkMACs(o.macs); err != nil {
		return err
	}
	if o.wait {
		if err := checkWaitTimeout(o.timeout); err != nil {
			return err
		}
	}
	name := o.name
	if name == "" {
		name = o.to + "-restore-" + stamp(o.clock.Now())
	}
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	r, err := c.BackupRestores.Create(ctx, &apiv1.CreateBackupRestoreRequest{BackupRestore: &apiv1.VirtualMachineBackupRestore{
		Metadata: &apiv1.ObjectMeta{Namespace: o.namespace, Name: name},
		Spec: &apiv1.VirtualMachineBackupRestoreSpec{Target: o.target, BackupId: id, VmName: o.to, NodeName: o.node,
			NewIdentity: o.newIdentity, MacAddresses: o.macs},
	}})
	if err != nil {
		return describeError(err, backupRestoreResource, name)
	}
	if _, err := fmt.Fprintf(out, "backup restore %s of backup %s into VM %s created\n", name, id, o.to); err != nil || !o.wait {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rate := &rateMeter{}
	f := follower[*apiv1.VirtualMachineBackupRestore, *apiv1.BackupRestoreEvent]{
		what: "backup restore " + name,
		open: func(ctx context.Context, opts *apiv1.WatchOptions) (client.Stream[*apiv1.BackupRestoreEvent], error) {
			return c.BackupRestores.Watch(ctx, &apiv1.WatchBackupRestoresRequest{Options: opts})
		},
		done: func(r *apiv1.VirtualMachineBackupRestore) bool {
			return apiv1.BackupFinal(r.GetStatus().GetPhase()) || r.GetMetadata().GetDeletionTimestamp() != nil
		},
		phase: func(r *apiv1.VirtualMachineBackupRestore) string { return backupPhase(r.GetStatus().GetPhase()) },
		clock: o.clock,
	}
	last, err := f.wait(wctx, r, newLineView(errOut, func(r *apiv1.VirtualMachineBackupRestore) []followLine {
		st := r.GetStatus()
		phase := backupPhase(st.GetPhase())
		if !apiv1.BackupFinal(st.GetPhase()) {
			phase += conditionNote(st.GetConditions(), "Progressing")
		}
		lines := []followLine{{key: "phase", text: phase}}
		if n := st.GetNodeName(); n != "" {
			lines = append(lines, followLine{key: "node", text: "  node: " + n})
		}
		if p := st.GetProgress(); p != nil && st.GetPhase() == apiv1.BackupInProgress {
			lines = append(lines, followLine{key: "progress", text: "  " + rate.describe(p)})
		}
		return lines
	}).show)
	if err != nil {
		return waitFailure(ctx, wctx, err, o.timeout, backupRestoreResource, name, backupPhase(last.GetStatus().GetPhase()), "virtplane-agent get vmbackuprestore "+name+" -w")
	}
	switch last.GetStatus().GetPhase() {
	case apiv1.BackupSucceeded:
		_, err := fmt.Fprintf(out, "VM %s restored from backup %s on node %s (halted: `virtplane-agent start %s` starts it)\n", o.to, id, last.GetStatus().GetNodeName(), o.to)
		return err
	case apiv1.BackupFailed:
		return fmt.Errorf("backup restore %s failed: %s", name, last.GetStatus().GetError())
	}
	return fmt.Errorf("backup restore %s is being deleted (phase %s)", name, backupPhase(last.GetStatus().GetPhase()))
}

func newBackupDeleteCommand(root *rootOptions) *cobra.Command {
	o := &deleteOptions{rootOptions: root}
	cmd := &cobra.Command{
		Use:   "delete NAME...",
		Short: "Delete backups (delete vmbackup NAME)",
		Long: `Delete backup objects. A backup whose deletion_policy is Retain (the
default) leaves its data in the target (backup list --target still lists
it, and it can be restored); Delete removes its manifest (its chunks go at
the target's next GC, unless other backups share them).`,
		Example: `  virtplane-agent backup delete db-20250102030405 --wait`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), append([]string{"vmbackup"}, args...))
		},
	}
	cmd.Flags().BoolVar(&o.wait, "wait", false, "wait until the backups are gone")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 2*time.Minute, "how long --wait waits")
	return cmd
}
