package command

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// namespace create, set-quota, allow: a cluster-admin's settings of a
// Namespace object (get namespace shows them with the usage; apply -f
// takes Namespace manifests too).

func newNamespaceCommand(o *rootOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "namespace",
		Aliases: []string{"ns"},
		Short:   "Namespaces: their quotas and the host resources their VMs may use (cluster-admins)",
		Long: `A namespace holds a team's objects; its quota bounds what they ask for in all
(vCPUs, memory, VMs, images, persistent storage per class) and its allowed
lists narrow the host policy (bridges, libvirt networks, storage classes,
port-forward ranges). get namespace shows usage beside the quota as
USED/LIMIT. A write that would go beyond a quota is refused with what is
used and what is allowed. See docs/security.md.`,
	}
	cmd.AddCommand(newNamespaceCreateCommand(o), newNamespaceSetQuotaCommand(o), newNamespaceAllowCommand(o))
	return cmd
}

const quotaHelp = `Quota items are KEY=VALUE: vcpus=16, memory=64Gi, vms=10, images=5,
storage.CLASS=500Gi (persistent volumes of storage class CLASS) and
storage=100Gi (volumes on the node's disk, no class). VALUE "none" removes
that bound (unlimited); keys not named keep their bound.`

func newNamespaceCreateCommand(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "create NAME [KEY=VALUE...]",
		Short:   "Create a namespace, with a quota if given",
		Long:    "Create a namespace. " + quotaHelp,
		Example: "  virtplane-agent namespace create team-a vcpus=16 memory=64Gi vms=10 images=5 storage.ceph=500Gi",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ns := &apiv1.Namespace{Metadata: &apiv1.ObjectMeta{Name: args[0]}, Spec: &apiv1.NamespaceSpec{}}
			if len(args) > 1 {
				ns.Spec.Quota = &apiv1.NamespaceQuota{}
				if err := applyQuota(ns.Spec.Quota, args[1:]); err != nil {
					return err
				}
			}
			return o.withClient(cmd.Context(), func(c *client.Client) error {
				_, err := c.Namespaces.Create(cmd.Context(), &apiv1.CreateNamespaceRequest{Namespace: ns})
				return printDone(cmd.OutOrStdout(), err, namespaceResource, args[0], "created")
			})
		},
	}
}

func newNamespaceSetQuotaCommand(o *rootOptions) *cobra.Command {
	return &cobra.Command{
		Use:     "set-quota NAME KEY=VALUE...",
		Short:   "Set bounds of a namespace's quota (creating the namespace if it has no object yet)",
		Long:    "Set bounds of a namespace's quota. " + quotaHelp,
		Example: "  virtplane-agent namespace set-quota team-a vcpus=16 memory=64Gi vms=10 images=5 storage.ceph=500Gi\n  virtplane-agent namespace set-quota team-a images=none",
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Checked before anything is read: a typo fails alone.
			if err := applyQuota(&apiv1.NamespaceQuota{}, args[1:]); err != nil {
				return err
			}
			return o.changeNamespace(cmd, args[0], func(s *apiv1.NamespaceSpec) error {
				if s.Quota == nil {
					s.Quota = &apiv1.NamespaceQuota{}
				}
				return applyQuota(s.Quota, args[1:])
			})
		},
	}
}

// allowFlags are namespace allow's lists, by flag name.
var allowFlags = []struct {
	flag, help string
	list       func(*apiv1.NamespaceAllowed) **apiv1.StringList
}{
	{"bridges", "Linux bridges the namespace's VMs may attach to", func(a *apiv1.NamespaceAllowed) **apiv1.StringList { return &a.Bridges }},
	{"networks", "libvirt networks they may use", func(a *apiv1.NamespaceAllowed) **apiv1.StringList { return &a.Networks }},
	{"storage-classes", "storage classes their persistent volumes may name", func(a *apiv1.NamespaceAllowed) **apiv1.StringList { return &a.StorageClasses }},
	{"port-forward-ranges", `host ports of their port forwards, "8080" or "20000-20999"`, func(a *apiv1.NamespaceAllowed) **apiv1.StringList { return &a.PortForwardRanges }},
}

func newNamespaceAllowCommand(o *rootOptions) *cobra.Command {
	lists := make([][]string, len(allowFlags))
	var clear []string
	cmd := &cobra.Command{
		Use:   "allow NAME [--bridges B,...] [--networks N,...] [--storage-classes C,...] [--port-forward-ranges R,...] [--clear LIST]",
		Short: "Set which host resources a namespace's VMs may use, within the host policy",
		Long: `Set the allow-lists of a namespace. A list given replaces the namespace's;
one not given keeps it. An empty value (--bridges=) allows nothing of that
kind; --clear bridges removes the list, so that everything the host policy
(serve --allowed-bridges and friends) allows is allowed.`,
		Example: `  virtplane-agent namespace allow team-a --bridges br0 --networks default --storage-classes ceph --port-forward-ranges 20000-20999
  virtplane-agent namespace allow team-a --clear networks`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			changed := false
			for _, c := range clear {
				if !validAllowList(c) {
					return fmt.Errorf("--clear %q: want one of %s", c, allowListNames())
				}
				if cmd.Flags().Changed(c) {
					return fmt.Errorf("--clear %s and --%s are exclusive", c, c)
				}
				changed = true
			}
			for _, f := range allowFlags {
				changed = changed || cmd.Flags().Changed(f.flag)
			}
			if !changed {
				return fmt.Errorf("name a list to set (%s) or --clear one", allowListNames())
			}
			return o.changeNamespace(cmd, args[0], func(s *apiv1.NamespaceSpec) error {
				if s.Allowed == nil {
					s.Allowed = &apiv1.NamespaceAllowed{}
				}
				for i, f := range allowFlags {
					switch {
					case cmd.Flags().Changed(f.flag):
						*f.list(s.Allowed) = &apiv1.StringList{Items: nonEmpty(lists[i])}
					case containsString(clear, f.flag):
						*f.list(s.Allowed) = nil
					}
				}
				return nil
			})
		},
	}
	for i, f := range allowFlags {
		cmd.Flags().StringSliceVar(&lists[i], f.flag, nil, f.help+" (comma-separated; empty: none)")
	}
	cmd.Flags().StringSliceVar(&clear, "clear", nil, "lists to remove (everything the host policy allows): "+allowListNames())
	return cmd
}

// changeNamespace reads namespace name, changes its spec with change and
// writes it back, again on a conflict; a namespace with no object yet is
// created with the changed spec.
func (o *rootOptions) changeNamespace(cmd *cobra.Command, name string, change func(*apiv1.NamespaceSpec) error) error {
	ctx := cmd.Context()
	return o.withClient(ctx, func(c *client.Client) error {
		what := "configured"
		err := updateRetrying(ctx, func(ctx context.Context) error {
			ns, err := c.Namespaces.Get(ctx, &apiv1.GetNamespaceRequest{Name: name})
			if status.Code(err) == codes.NotFound {
				ns, what = &apiv1.Namespace{Metadata: &apiv1.ObjectMeta{Name: name}}, "created"
			} else if err != nil {
				return err
			}
			if ns.Spec == nil {
				ns.Spec = &apiv1.NamespaceSpec{}
			}
			if err := change(ns.Spec); err != nil {
				return err
			}
			if what == "created" {
				_, err = c.Namespaces.Create(ctx, &apiv1.CreateNamespaceRequest{Namespace: ns})
				return err
			}
			ns.Status = nil // the server's
			_, err = c.Namespaces.Update(ctx, &apiv1.UpdateNamespaceRequest{Namespace: ns})
			return err
		})
		return printDone(cmd.OutOrStdout(), err, namespaceResource, name, what)
	})
}

// applyQuota sets the KEY=VALUE items on q; "none" unsets a bound.
func applyQuota(q *apiv1.NamespaceQuota, items []string) error {
	for _, it := range items {
		key, value, ok := strings.Cut(it, "=")
		if !ok || value == "" {
			return fmt.Errorf("quota item %q: want KEY=VALUE (vcpus, memory, vms, images, storage or storage.CLASS)", it)
		}
		unset := value == "none"
		count := func(dst **int64) error {
			if unset {
				*dst = nil
				return nil
			}
			n, err := strconv.ParseInt(value, 10, 64)
			if err != nil || n < 0 {
				return fmt.Errorf("quota %s=%q: want a whole number of 0 or more, or none", key, value)
			}
			*dst = &n
			return nil
		}
		quantity := func() (string, error) {
			if _, err := k8sresource.ParseQuantity(value); err != nil || strings.HasPrefix(value, "-") {
				return "", fmt.Errorf("quota %s=%q: want a quantity such as 64Gi, or none", key, value)
			}
			return value, nil
		}
		var err error
		switch {
		case key == "vcpus":
			err = count(&q.Vcpus)
		case key == "vms":
			err = count(&q.Vms)
		case key == "images":
			err = count(&q.Images)
		case key == "memory" && unset:
			q.Memory = nil
		case key == "memory":
			var v string
			if v, err = quantity(); err == nil {
				q.Memory = &v
			}
		case key == "storage" || strings.HasPrefix(key, "storage."):
			class := strings.TrimPrefix(strings.TrimPrefix(key, "storage"), ".")
			if key != "storage" && class == "" {
				return fmt.Errorf("quota item %q: storage.CLASS needs a class name", it)
			}
			if unset {
				delete(q.PersistentStorage, class)
				break
			}
			var v string
			if v, err = quantity(); err == nil {
				if q.PersistentStorage == nil {
					q.PersistentStorage = map[string]string{}
				}
				q.PersistentStorage[class] = v
			}
		default:
			return fmt.Errorf("quota item %q: unknown key %q (want vcpus, memory, vms, images, storage or storage.CLASS)", it, key)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func validAllowList(name string) bool {
	for _, f := range allowFlags {
		if f.flag == name {
			return true
		}
	}
	return false
}

func allowListNames() string {
	names := make([]string, len(allowFlags))
	for i, f := range allowFlags {
		names[i] = f.flag
	}
	return orList(names)
}

// nonEmpty is items without empty strings, never nil: --bridges= is an
// empty list (nothing allowed), not an absent one.
func nonEmpty(items []string) []string {
	out := []string{}
	for _, s := range items {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
