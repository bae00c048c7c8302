package command

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// defaultExportReadyTimeout bounds the wait for an export to be Ready.
const defaultExportReadyTimeout = 2 * time.Minute

func newExportCommand(root *rootOptions, clk clock.WithTicker) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Export a stopped VM's volumes over HTTPS",
		Long: `VM exports (KubeVirt's VirtualMachineExport): the persistent volumes of a
stopped VM, or the volume copies of a snapshot, served over HTTPS by the node
that holds them, as raw, gzip or qcow2, to whoever has the export's token,
until its TTL (default 2h) runs out. Starting the VM ends its export. The
token is shown once, when the export is made. docs/export.md describes it.`,
		Example: `  virtplane-agent export create demo --ttl 30m --export-token-file demo.token
  virtplane-agent export download demo --volume data --output data.qcow2
  virtplane-agent get vmexports
  virtplane-agent export delete demo`,
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(
		newExportCreateCommand(root, clk),
		newExportDownloadCommand(root, clk),
		newExportDeleteCommand(root),
	)
	return cmd
}

// exportSource is what export create and download make an export of.
type exportSource struct {
	name, snapshot string
	ttl            time.Duration
}

func (s *exportSource) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&s.name, "name", "", "the export's name (default the VM's, or the snapshot's with --snapshot)")
	f.StringVar(&s.snapshot, "snapshot", "", "export this snapshot of the VM instead of the VM's volumes")
	f.DurationVar(&s.ttl, "ttl", apiv1.DefaultExportTTL, "how long the export serves")
}

func (s *exportSource) exportName(vm string) string {
	switch {
	case s.name != "":
		return s.name
	case s.snapshot != "":
		return s.snapshot
	}
	return vm
}

func (s *exportSource) object(namespace, vm string) *apiv1.VirtualMachineExport {
	spec := &apiv1.VirtualMachineExportSpec{SourceKind: apiv1.KindVirtualMachine, SourceName: vm, TtlDuration: s.ttl.String()}
	if s.snapshot != "" {
		spec.SourceKind, spec.SourceName = apiv1.KindSnapshot, s.snapshot
	}
	return &apiv1.VirtualMachineExport{Metadata: &apiv1.ObjectMeta{Namespace: namespace, Name: s.exportName(vm)}, Spec: spec}
}

type exportCreateOptions struct {
	*rootOptions
	exportSource
	tokenFile string
	wait      bool
	timeout   time.Duration
	clock     clock.WithTicker
}

func newExportCreateCommand(root *rootOptions, clk clock.WithTicker) *cobra.Command {
	o := &exportCreateOptions{rootOptions: root, clock: clk}
	cmd := &cobra.Command{
		Use:   "create VM",
		Short: "Export a VM's volumes (or a snapshot's)",
		Long: `Create an export of VM (or of its snapshot --snapshot), named --name or after
the VM (the snapshot). The export's token is shown this once: on standard
output, or written to --export-token-file (made 0600; it must not exist).
With --wait the command returns when the export is Ready and prints its
links; a VM that runs keeps its export Pending until it stops.`,
		Example: `  virtplane-agent export create demo --wait
  virtplane-agent export create demo --snapshot before-upgrade --ttl 30m --export-token-file t`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), args[0])
		},
	}
	o.exportSource.flags(cmd)
	f := cmd.Flags()
	f.StringVar(&o.tokenFile, "export-token-file", "", "write the export's token to this new file (0600) instead of standard output")
	f.BoolVar(&o.wait, "wait", false, "wait until the export is Ready and print its links")
	f.DurationVar(&o.timeout, "timeout", defaultExportReadyTimeout, "how long --wait waits")
	return cmd
}

func (o *exportCreateOptions) run(ctx context.Context, out io.Writer, vm string) error {
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	e, token, err := createExport(ctx, c, o.exportSource.object(o.namespace, vm))
	if err != nil {
		return err
	}
	name := e.GetMetadata().GetName()
	if o.tokenFile != "" {
		if err := writeNewSecretFile(o.tokenFile, token); err != nil {
			return fmt.Errorf("export %s created, but its token could not be written (delete the export and make it again): %w", name, err)
		}
		_, err = fmt.Fprintf(out, "export %s created; its token is in %s\n", name, o.tokenFile)
	} else {
		_, err = fmt.Fprintf(out, "export %s created; its token (shown once): %s\n", name, token)
	}
	if err != nil || !o.wait {
		return err
	}
	e, err = waitExportReady(ctx, c, o.clock, o.namespace, name, o.timeout)
	if err != nil {
		return err
	}
	for _, v := range e.GetStatus().GetVolumes() {
		for _, l := range v.GetLinks() {
			if _, err := fmt.Fprintf(out, "%s\t%s\t%s\n", v.GetName(), l.GetFormat(), l.GetUrl()); err != nil {
				return err
			}
		}
	}
	return nil
}

func createExport(ctx context.Context, c *client.Client, e *apiv1.VirtualMachineExport) (*apiv1.VirtualMachineExport, string, error) {
	resp, err := c.Exports.Create(ctx, &apiv1.CreateExportRequest{Export: e})
	if err != nil {
		return nil, "", describeError(err, exportResource, e.GetMetadata().GetName())
	}
	return resp.GetExport(), resp.GetToken(), nil
}

// writeNewSecretFile writes a secret to a file that must not exist yet,
// readable by its owner alone from the first byte.
func writeNewSecretFile(path, secret string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(secret + "\n"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// waitExportReady polls the export until it is Ready; Skipped and
// Terminated are errors with their reason, and so is the timeout.
func waitExportReady(ctx context.Context, c *client.Client, clk clock.WithTicker, namespace, name string, timeout time.Duration) (*apiv1.VirtualMachineExport, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := clk.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		e, err := c.Exports.Get(ctx, &apiv1.GetExportRequest{Key: &apiv1.ObjectKey{Namespace: namespace, Name: name}})
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("export %s not Ready after %s", name, timeout)
			}
			return nil, describeError(err, exportResource, name)
		}
		cond := apiv1.FindCondition(e.GetStatus().GetConditions(), apiv1.ConditionReady)
		switch e.GetStatus().GetPhase() {
		case apiv1.ExportReady:
			return e, nil
		case apiv1.ExportSkipped, apiv1.ExportTerminated:
			return nil, fmt.Errorf("export %s is %s: %s", name, e.GetStatus().GetPhase(), cond.GetMessage())
		}
		select {
		case <-ctx.Done():
			msg := ""
			if cond != nil {
				msg = ": " + cond.GetMessage()
			}
			return nil, fmt.Errorf("export %s still %s after %s%s", name, e.GetStatus().GetPhase(), timeout, msg)
		case <-tick.C():
		}
	}
}

func newExportDeleteCommand(root *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete an export: its downloads are cut and its files removed",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := root.dial(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			if _, err := c.Exports.Delete(ctx, &apiv1.DeleteExportRequest{Key: &apiv1.ObjectKey{Namespace: root.namespace, Name: args[0]}}); err != nil {
				return describeError(err, exportResource, args[0])
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "export %s deleted\n", args[0])
			return err
		},
	}
}
