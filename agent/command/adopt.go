package command

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	"sigs.k8s.io/yaml"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

// defaultAdoptTimeout bounds adopt's wait: the node inspects the domain
// in seconds; the take-over waits for the VM's instance to be placed.
const defaultAdoptTimeout = 5 * time.Minute

type adoptOptions struct {
	*rootOptions
	node, name, runStrategy, output string
	dryRun                          bool
	timeout                         time.Duration
	clock                           clock.Clock
}

func newAdoptCommand(root *rootOptions, clk clock.Clock) *cobra.Command {
	o := &adoptOptions{rootOptions: root, clock: clk}
	cmd := &cobra.Command{
		Use:   "adopt DOMAIN --node NODE",
		Short: "Bring a libvirt domain defined outside virtplane under virtplane, without restarting it",
		Long: `Adopt libvirt domain DOMAIN of node NODE as VM --name (default DOMAIN) in
the namespace (docs/adopt.md). The node maps the domain to a VM spec: CPUs,
memory, BIOS or EFI, a kernel from its image directory, file disks in the
directories its agent allows (--adopt-dir) as persistent volumes, NICs on
user networking, bridges and libvirt networks the server allows. Whatever
cannot be mapped is refused, each element with why, and nothing is made.

Without --dry-run the VM is made and its first instance takes the running
domain over: the same QEMU process, the guest is not restarted. The domain
keeps its name and its disk files until its first stop through virtplane;
at the next start the files are copied into the VM's volumes and the VM
runs as any other.

--dry-run prints the VM spec and the refusals and makes nothing. The
command waits for the end (Adopted, Refused or Failed) and fails with the
refusals or the reason.`,
		Example: `  virtplane-agent adopt legacy-web --node node-a --dry-run
  virtplane-agent adopt legacy-web --node node-a --name web -n prod
  virtplane-agent get vmadoption web -n prod -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0])
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.node, "node", "", "the node whose libvirtd has the domain (required)")
	f.StringVar(&o.name, "name", "", "the VM's name (default the domain's, when it is a DNS-1123 label)")
	f.BoolVar(&o.dryRun, "dry-run", false, "map the domain and print the VM spec and the refusals; make nothing")
	f.StringVar(&o.runStrategy, "run-strategy", apiv1.RunStrategyAlways, "the VM's run strategy: Always or Manual")
	f.StringVarP(&o.output, "output", "o", "", "print the adoption as yaml or json instead of the summary")
	f.DurationVar(&o.timeout, "timeout", defaultAdoptTimeout, "how long to wait for the node (the adoption keeps going after it)")
	return cmd
}

func (o *adoptOptions) run(ctx context.Context, out, errOut io.Writer, domain string) error {
	if o.node == "" {
		return fmt.Errorf("--node is required: the node whose libvirtd has domain %s", domain)
	}
	if o.output != "" {
		if err := checkFormat(o.output); err != nil || o.output == formatTable {
			return fmt.Errorf("--output %q: want yaml or json", o.output)
		}
	}
	if err := checkWaitTimeout(o.timeout); err != nil {
		return err
	}
	name := o.name
	if name == "" {
		if len(utilvalidation.IsDNS1123Label(domain)) > 0 {
			return fmt.Errorf("domain %q is not a VM name (a DNS-1123 label): name the VM with --name", domain)
		}
		name = domain
	}
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	a, err := c.Adoptions.Create(ctx, &apiv1.CreateAdoptionRequest{Adoption: &apiv1.VirtualMachineAdoption{
		Metadata: &apiv1.ObjectMeta{Namespace: o.namespace, Name: name},
		Spec:     &apiv1.VirtualMachineAdoptionSpec{NodeName: o.node, DomainName: domain, DryRun: o.dryRun, RunStrategy: o.runStrategy},
	}})
	if err != nil {
		return describeError(err, adoptionResource, name)
	}
	if o.dryRun {
		// The dry run's object is of no use once read.
		defer func() {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_, _ = c.Adoptions.Delete(dctx, &apiv1.DeleteAdoptionRequest{Key: &apiv1.ObjectKey{Namespace: o.namespace, Name: name},
				Options: &apiv1.DeleteOptions{Uid: a.GetMetadata().GetUid()}})
		}()
	}
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	last, err := adoptionFollower(c, o.clock, name).wait(wctx, a, newLineView(errOut, adoptionLines).show)
	if err != nil {
		return waitFailure(ctx, wctx, err, o.timeout, adoptionResource, name, adoptionPhase(last),
			"virtplane-agent get vmadoption "+name+" -w")
	}
	if o.output != "" {
		if err := printObject(out, o.output, last); err != nil {
			return err
		}
	} else if err := writeAdoption(out, last); err != nil {
		return err
	}
	return adoptionOutcome(out, last, o.output == "")
}

func adoptionFollower(c *client.Client, clk clock.Clock, name string) follower[*apiv1.VirtualMachineAdoption, *apiv1.AdoptionEvent] {
	return follower[*apiv1.VirtualMachineAdoption, *apiv1.AdoptionEvent]{
		what: "adoption " + name,
		open: func(ctx context.Context, opts *apiv1.WatchOptions) (client.Stream[*apiv1.AdoptionEvent], error) {
			return c.Adoptions.Watch(ctx, &apiv1.WatchAdoptionsRequest{Options: opts})
		},
		done:  apiv1.AdoptionFinal,
		phase: adoptionPhase,
		clock: clk,
	}
}

func adoptionPhase(a *apiv1.VirtualMachineAdoption) string {
	if p := a.GetStatus().GetPhase(); p != "" {
		return p
	}
	return apiv1.AdoptionPending
}

// adoptionLines describes an adoption while adopt waits: its phase and
// what it does now.
func adoptionLines(a *apiv1.VirtualMachineAdoption) []followLine {
	text := adoptionPhase(a)
	if m := a.GetStatus().GetMessage(); m != "" && !apiv1.AdoptionFinal(a) {
		text += " (" + m + ")"
	}
	return []followLine{{key: "phase", text: text}}
}

// writeAdoption prints what the node found: the domain, the VM spec it
// maps to, its disks, the notes and the refusals.
func writeAdoption(w io.Writer, a *apiv1.VirtualMachineAdoption) error {
	st := a.GetStatus()
	var b strings.Builder
	fmt.Fprintf(&b, "domain %s on node %s", a.GetSpec().GetDomainName(), a.GetSpec().GetNodeName())
	if u := st.GetDomainUuid(); u != "" {
		fmt.Fprintf(&b, " (uuid %s, %s", u, st.GetDomainState())
		if p := st.GetQemuPid(); p > 0 {
			fmt.Fprintf(&b, ", QEMU pid %d", p)
		}
		b.WriteString(")")
	}
	b.WriteString("\n")
	if spec := st.GetSpec(); spec != nil {
		j, err := marshalOptions.Marshal(spec)
		if err != nil {
			return err
		}
		y, err := yaml.JSONToYAML(j)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "maps to the VM %s, template spec:\n", apiv1.Ref(a.GetMetadata().GetNamespace(), a.GetMetadata().GetName()))
		for _, l := range strings.Split(strings.TrimRight(string(y), "\n"), "\n") {
			b.WriteString("  " + l + "\n")
		}
	}
	if ds := st.GetDisks(); len(ds) > 0 {
		b.WriteString("disks (copied into the VM's volumes at its first start through virtplane):\n")
		for _, d := range ds {
			fmt.Fprintf(&b, "  %s: %s (%s, %s)\n", d.GetName(), d.GetPath(), d.GetFormat(), k8sresource.NewQuantity(d.GetVirtualSizeBytes(), k8sresource.BinarySI))
		}
	}
	if ns := st.GetNotes(); len(ns) > 0 {
		b.WriteString("notes (what the first start through virtplane drops or changes):\n")
		for _, n := range ns {
			b.WriteString("  - " + n + "\n")
		}
	}
	if rs := st.GetRefusals(); len(rs) > 0 {
		b.WriteString("refused:\n")
		for _, r := range rs {
			fmt.Fprintf(&b, "  - %s: %s\n", r.GetElement(), r.GetReason())
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// adoptionOutcome is nil for an adoption that did what it was asked (a
// dry run that maps, an adoption that took the domain over; said on out
// when summary), else the reason.
func adoptionOutcome(out io.Writer, a *apiv1.VirtualMachineAdoption, summary bool) error {
	name, st := a.GetMetadata().GetName(), a.GetStatus()
	var msg string
	switch st.GetPhase() {
	case apiv1.AdoptionRefused:
		return fmt.Errorf("domain %s cannot be adopted: %d element(s) refused%s", a.GetSpec().GetDomainName(), len(st.GetRefusals()), suffix(st.GetMessage()))
	case apiv1.AdoptionFailed:
		return fmt.Errorf("adoption %s failed: %s", name, st.GetMessage())
	case apiv1.AdoptionAdopted:
		msg = fmt.Sprintf("VM %s adopted domain %s: QEMU pid %d, not restarted; its disks become its volumes at its first start through virtplane\n",
			apiv1.Ref(a.GetMetadata().GetNamespace(), name), a.GetSpec().GetDomainName(), st.GetQemuPid())
	default:
		msg = "dry run: nothing was made\n"
	}
	if !summary {
		return nil
	}
	_, err := io.WriteString(out, msg)
	return err
}

func suffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}
