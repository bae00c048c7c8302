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
	"google.golang.org/protobuf/reflect/protoreflect"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

func newApplyCommand(root *rootOptions) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or update virtual machines, replica sets, pools and storage classes, or create snapshots, restores and clones, from a YAML or JSON manifest",
		Example: `  virtplane-agent apply -f examples/vm.yaml
  virtplane-agent apply -f examples/pool.yaml
  virtplane-agent apply -f examples/snapshot.yaml
  virtplane-agent apply -f examples/storageclass.yaml
  cat vm.json | virtplane-agent apply -f -`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			source, data, err := readManifest(cmd.InOrStdin(), file)
			if err != nil {
				return err
			}
			objs, err := parseManifests(source, data, root.namespace, root.namespaceExplicit())
			if err != nil {
				return err
			}
			return runApply(cmd.Context(), root, cmd.OutOrStdout(), cmd.ErrOrStderr(), objs)
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

func runApply(ctx context.Context, root *rootOptions, out, errOut io.Writer, objs []object) error {
	c, err := root.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()

	failed := 0
	for _, obj := range objs {
		name := obj.GetMetadata().GetName()
		res, err := lookupResource(kindOf(obj))
		if err != nil {
			return err // parseManifests takes only kinds the CLI knows
		}
		result, err := applyObject(ctx, c, res, obj)
		if err != nil {
			err = describeError(err, res, name)
			// One object, or no point in trying the others: report plainly.
			switch status.Code(err) {
			case codes.Unavailable, codes.Unauthenticated, codes.PermissionDenied, codes.Canceled:
				return err
			}
			if len(objs) == 1 {
				return err
			}
			fmt.Fprintf(errOut, "error: %v\n", err)
			failed++
			continue
		}
		fmt.Fprintf(out, "%s/%s %s\n", res.Singular, name, result)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d objects could not be applied", failed, len(objs))
	}
	return nil
}

// applyAttempts bounds the retries when someone else writes the same
// object between our read and our update.
const applyAttempts = 5

// applyObject creates obj (of res, a kind with create) or replaces the
// spec, labels and annotations of the existing one (like kubectl replace,
// not a three-way merge: labels set by others are dropped). It returns
// "created", "configured" or "unchanged".
func applyObject(ctx context.Context, c *client.Client, res *resource, obj object) (string, error) {
	md := obj.GetMetadata()
	exists := false
	var lastErr error
	for range applyAttempts {
		if !exists {
			err := createObject(ctx, c, res, obj)
			if err == nil {
				return "created", nil
			}
			if status.Code(err) != codes.AlreadyExists {
				return "", err
			}
			exists = true
		}

		cur, err := getObject(ctx, c, res, md.GetNamespace(), md.GetName())
		if status.Code(err) == codes.NotFound {
			// Deleted since our create failed: create it after all.
			exists, lastErr = false, err
			continue
		}
		if err != nil {
			return "", err
		}
		if sameDesiredState(obj, cur) {
			return "unchanged", nil
		}

		// Start from the server's object so that server-owned metadata
		// (uid, resource_version, ...) is what the server expects; the
		// manifest provides what an update replaces.
		upd := proto.Clone(cur).(object)
		um := upd.GetMetadata()
		if um == nil {
			um = &apiv1.ObjectMeta{}
			setField(upd, "metadata", um)
		}
		setField(upd, "spec", specOf(obj))
		um.Labels = md.GetLabels()
		um.Annotations = md.GetAnnotations()
		setField(upd, "status", nil)
		got, err := updateObject(ctx, c, res, upd)
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
func sameDesiredState(want, have object) bool {
	return proto.Equal(specOf(want), specOf(have)) &&
		maps.Equal(want.GetMetadata().GetLabels(), have.GetMetadata().GetLabels()) &&
		maps.Equal(want.GetMetadata().GetAnnotations(), have.GetMetadata().GetAnnotations())
}

// specOf is the spec of obj, nil when it has none set. Every kind apply
// takes has metadata, spec and status fields by those names, so apply
// handles them alike without a case per kind.
func specOf(obj object) proto.Message {
	m := obj.ProtoReflect()
	fd := m.Descriptor().Fields().ByName("spec")
	if !m.Has(fd) {
		return nil
	}
	return m.Get(fd).Message().Interface()
}

// setField sets the message field name of obj to v (nil clears it).
func setField(obj object, name string, v proto.Message) {
	m := obj.ProtoReflect()
	fd := m.Descriptor().Fields().ByName(protoreflect.Name(name))
	if v == nil || !v.ProtoReflect().IsValid() {
		m.Clear(fd)
		return
	}
	m.Set(fd, protoreflect.ValueOfMessage(v.ProtoReflect()))
}
