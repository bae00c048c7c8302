package command

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

func newApplyCommand(root *rootOptions) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or update virtual machines from a YAML or JSON manifest",
		Example: `  virtplane-agent apply -f examples/vm.yaml
  cat vm.json | virtplane-agent apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			source, data, err := readManifest(cmd.InOrStdin(), file)
			if err != nil {
				return err
			}
			vms, err := parseManifests(source, data, root.namespace, root.namespaceExplicit())
			if err != nil {
				return err
			}
			return runApply(cmd.Context(), root, cmd.OutOrStdout(), cmd.ErrOrStderr(), vms)
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", `manifest to apply ("-" reads standard input)`)
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func readManifest(stdin io.Reader, file string) (source string, data []byte, err error) {
	if file == "-" {
		data, err = io.ReadAll(stdin)
		if err != nil {
			return "", nil, fmt.Errorf("read standard input: %w", err)
		}
		return "<stdin>", data, nil
	}
	data, err = os.ReadFile(file)
	if err != nil {
		return "", nil, fmt.Errorf("read manifest: %w", err)
	}
	return file, data, nil
}

func runApply(ctx context.Context, root *rootOptions, out, errOut io.Writer, vms []*apiv1.VirtualMachine) error {
	c, err := root.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()

	failed := 0
	for _, vm := range vms {
		name := vm.GetMetadata().GetName()
		result, err := applyVM(ctx, c.VMs, vm)
		if err != nil {
			err = describeError(err, vmResource, name)
			// One object, or no point in trying the others: report plainly.
			switch status.Code(err) {
			case codes.Unavailable, codes.Unauthenticated, codes.PermissionDenied, codes.Canceled:
				return err
			}
			if len(vms) == 1 {
				return err
			}
			fmt.Fprintf(errOut, "error: %v\n", err)
			failed++
			continue
		}
		fmt.Fprintf(out, "virtualmachine/%s %s\n", name, result)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d objects could not be applied", failed, len(vms))
	}
	return nil
}

// applyAttempts bounds the retries when someone else writes the same VM
// between our read and our update.
const applyAttempts = 5

// applyVM creates vm or replaces the spec, labels and annotations of the
// existing one (like kubectl replace, not a three-way merge: labels set by
// others are dropped). It returns "created", "configured" or "unchanged".
func applyVM(ctx context.Context, vms apiv1.VirtualMachinesClient, vm *apiv1.VirtualMachine) (string, error) {
	key := &apiv1.ObjectKey{Namespace: vm.GetMetadata().GetNamespace(), Name: vm.GetMetadata().GetName()}
	exists := false
	var lastErr error
	for range applyAttempts {
		if !exists {
			_, err := vms.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm})
			if err == nil {
				return "created", nil
			}
			if status.Code(err) != codes.AlreadyExists {
				return "", err
			}
			exists = true
		}

		cur, err := vms.Get(ctx, &apiv1.GetVirtualMachineRequest{Key: key})
		if status.Code(err) == codes.NotFound {
			// Deleted since our create failed: create it after all.
			exists, lastErr = false, err
			continue
		}
		if err != nil {
			return "", err
		}
		if sameDesiredState(vm, cur) {
			return "unchanged", nil
		}

		// Start from the server's object so that server-owned metadata
		// (uid, resource_version, ...) is what the server expects; the
		// manifest provides what an update replaces.
		upd := proto.Clone(cur).(*apiv1.VirtualMachine)
		if upd.Metadata == nil {
			upd.Metadata = &apiv1.ObjectMeta{}
		}
		upd.Spec = vm.GetSpec()
		upd.Metadata.Labels = vm.GetMetadata().GetLabels()
		upd.Metadata.Annotations = vm.GetMetadata().GetAnnotations()
		upd.Status = nil
		got, err := vms.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: upd})
		switch status.Code(err) {
		case codes.OK:
			// The server may normalise what we sent into what it has; a write
			// that changed nothing keeps the resource version.
			if got.GetMetadata().GetResourceVersion() == cur.GetMetadata().GetResourceVersion() {
				return "unchanged", nil
			}
			return "configured", nil
		case codes.Aborted:
			// Someone wrote in between; read again.
		case codes.NotFound:
			exists = false
		default:
			return "", err
		}
		lastErr = err
	}
	st := status.Convert(lastErr)
	return "", status.Errorf(st.Code(), "gave up after %d attempts: %s", applyAttempts, st.Message())
}

// sameDesiredState compares what an update would write.
func sameDesiredState(want, have *apiv1.VirtualMachine) bool {
	return proto.Equal(want.GetSpec(), have.GetSpec()) &&
		maps.Equal(want.GetMetadata().GetLabels(), have.GetMetadata().GetLabels()) &&
		maps.Equal(want.GetMetadata().GetAnnotations(), have.GetMetadata().GetAnnotations())
}
