package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

type getOptions struct {
	*rootOptions
	output        string
	allNamespaces bool
	selector      string
	watch         bool
	showLabels    bool
	now           func() time.Time
}

func newGetCommand(root *rootOptions) *cobra.Command {
	o := &getOptions{rootOptions: root, now: time.Now}
	cmd := &cobra.Command{
		Use:   "get TYPE [NAME]",
		Short: "Display virtual machines (vm), their instances (vmi), replica sets (rs), pools, nodes, images, storage classes (sc), migrations, snapshots (vmsnapshot, vmsnapshotcontent), restores (vmrestore), clones (vmclone), namespaces (ns), users, service accounts (sa), credentials and role bindings",
		Example: `  virtplane-agent get vms
  virtplane-agent get vm demo -o yaml
  virtplane-agent get vmi -A -l app=demo
  virtplane-agent get rs
  virtplane-agent get pool db -o yaml
  virtplane-agent get nodes -w
  virtplane-agent get nodes -o wide
  virtplane-agent get nodes --show-labels
  virtplane-agent get images
  virtplane-agent get storageclasses
  virtplane-agent get vm -o wide
  virtplane-agent get migrations -w
  virtplane-agent get migrations -l virtplane.io/vmi-name=demo
  virtplane-agent get vmsnapshots -o wide
  virtplane-agent get vmrestore -w
  virtplane-agent get namespaces
  virtplane-agent get namespace team-a -o yaml
  virtplane-agent get sa -n team-a
  virtplane-agent get rolebindings -A
  virtplane-agent get credentials -o wide`,
		Args:      cobra.RangeArgs(1, 2),
		ValidArgs: resourceArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", formatTable, "output format: table, wide (nodes' bridges and networks, instances' addresses, VMs' persistent volumes and their storage classes), json or yaml")
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list objects of all namespaces")
	f.StringVarP(&o.selector, "selector", "l", "", "label selector, e.g. app=web,tier!=db")
	f.BoolVarP(&o.watch, "watch", "w", false, "after listing, print changes as they happen")
	f.BoolVar(&o.showLabels, "show-labels", false, "add a LABELS column (table and wide output)")
	return cmd
}

func (o *getOptions) run(ctx context.Context, out, errOut io.Writer, args []string) error {
	res, err := lookupResource(args[0])
	if err != nil {
		return err
	}
	var name string
	if len(args) == 2 {
		name = args[1]
	}
	// A wide table is the table with wideHeader's columns added; from
	// here on it is a table.
	wide := o.output == formatWide
	if wide {
		o.output = formatTable
	} else if checkFormat(o.output) != nil {
		return fmt.Errorf("unsupported output format %q (want table, wide, json or yaml)", o.output)
	}
	if name != "" && o.allNamespaces {
		return errors.New("a resource cannot be retrieved by name across all namespaces")
	}
	if name != "" && o.selector != "" {
		return errors.New("a name cannot be combined with a label selector")
	}
	if res.getBy != nil {
		return res.getBy.get(ctx, o, out, errOut, name, wide)
	}
	header, row := o.table(res, wide)
	namespace := o.namespace
	if o.allNamespaces || !res.Namespaced {
		namespace = ""
	}

	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()

	switch {
	case o.watch:
		return o.runWatch(ctx, c, out, res, namespace, name, header, row)
	case name != "":
		obj, err := getObject(ctx, c, res, namespace, name)
		if err != nil {
			return describeError(err, res, name)
		}
		if o.output == formatTable {
			return printTable(out, header(false), [][]string{row(obj, o.now(), false)})
		}
		return printObject(out, o.output, obj)
	}

	items, err := listObjects(ctx, c, res, namespace, o.selector)
	if err != nil {
		return describeError(err, nil, "")
	}
	if o.output != formatTable {
		return printList(out, o.output, items)
	}
	if len(items) == 0 {
		_, err := fmt.Fprintln(errOut, noResources(namespace))
		return err
	}
	withNS := o.allNamespaces && res.Namespaced
	now := o.now()
	rows := make([][]string, len(items))
	for i, it := range items {
		rows[i] = row(it, now, withNS)
	}
	return printTable(out, header(withNS), rows)
}

// table returns the header and row functions of res's table, wide or
// not, with a LABELS column last for --show-labels (as kubectl's).
func (o *getOptions) table(res *resource, wide bool) (header func(withNS bool) []string, row func(obj object, now time.Time, withNS bool) []string) {
	header = func(withNS bool) []string {
		h := tableHeader(res, withNS)
		if wide {
			h = append(h, wideHeader(res)...)
		}
		if o.showLabels {
			h = append(h, "LABELS")
		}
		return h
	}
	row = func(obj object, now time.Time, withNS bool) []string {
		r := tableRow(res, obj, now, withNS)
		if wide {
			r = append(r, wideCells(res, obj)...)
		}
		if o.showLabels {
			// kubectl's own formatting: k=v,... sorted, <none>.
			r = append(r, labels.FormatLabels(obj.GetMetadata().GetLabels()))
		}
		return r
	}
	return header, row
}

func noResources(namespace string) string {
	if namespace == "" {
		return "No resources found"
	}
	return fmt.Sprintf("No resources found in %s namespace.", namespace)
}

// runWatch prints the current objects and then every change until the
// stream ends or the user interrupts, like kubectl get -w.
func (o *getOptions) runWatch(ctx context.Context, c *client.Client, out io.Writer, res *resource, namespace, name string,
	header func(bool) []string, row func(object, time.Time, bool) []string) error {
	withNS := o.allNamespaces && res.Namespaced
	var table *streamTable
	if o.output == formatTable {
		var err error
		if table, err = newStreamTable(out, header(withNS)); err != nil {
			return err
		}
	}
	printed := 0
	opts := &apiv1.WatchOptions{Namespace: namespace, LabelSelector: o.selector, Name: name}
	err := watchObjects(ctx, c, res, opts, func(typ apiv1.EventType, obj object) error {
		switch typ {
		case apiv1.EventType_ADDED, apiv1.EventType_MODIFIED, apiv1.EventType_DELETED:
		default:
			// RESET and SYNCED frame the listing; they are not objects.
			return nil
		}
		if obj == nil {
			return nil
		}
		printed++
		switch {
		case table != nil:
			return table.row(row(obj, o.now(), withNS))
		case o.output == formatYAML && printed > 1:
			if _, err := io.WriteString(out, "---\n"); err != nil {
				return err
			}
		}
		return printObject(out, o.output, obj)
	})
	if err == nil || interrupted(ctx, err) {
		return nil
	}
	return describeError(err, res, name)
}
