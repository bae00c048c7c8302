package command

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
)

type cloneOptions struct {
	*rootOptions
	fromSnapshot bool
	name         string
	macs         map[string]string
	labels       map[string]string
	annotations  map[string]string
	wait         bool
	timeout      time.Duration
	clock        clock.Clock
}

func newCloneCommand(root *rootOptions, clk clock.Clock) *cobra.Command {
	o := &cloneOptions{rootOptions: root, clock: clk}
	cmd := &cobra.Command{
		Use:   "clone SOURCE TARGET",
		Short: "Make a new virtual machine from a virtual machine or a snapshot",
		Long: `Make VM TARGET from VM SOURCE, or from snapshot SOURCE with --from-snapshot
(KubeVirt's VirtualMachineClone, named --name or <TARGET>-clone-<UTC
yyyymmddhhmmss>). The new VM is halted, on the source's node, with its own
copy of every persistent volume and new MAC addresses but those --mac
gives. From a VM the clone takes a snapshot first (online if the VM runs)
and deletes it when done. TARGET must not exist.

With --wait the command prints the clone's phases and returns when it
ended: 0 when it succeeded, an error with the reason when it failed.`,
		Example: `  virtplane-agent clone demo demo-copy --wait
  virtplane-agent clone demo-20250102030405 demo-old --from-snapshot
  virtplane-agent clone demo web-2 --mac default=02:00:00:00:00:02 --label app=web --wait`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), args[0], args[1])
		},
	}
	f := cmd.Flags()
	f.BoolVar(&o.fromSnapshot, "from-snapshot", false, "SOURCE is a snapshot, not a VM")
	f.StringVar(&o.name, "name", "", "the clone's name (default <TARGET>-clone-<UTC yyyymmddhhmmss>)")
	f.StringToStringVar(&o.macs, "mac", nil, "INTERFACE=MAC for the new VM, repeatable; other interfaces get new addresses")
	f.StringToStringVar(&o.labels, "label", nil, "k=v labels for the new VM over the source's, repeatable")
	f.StringToStringVar(&o.annotations, "annotation", nil, "k=v annotations for the new VM over the source's, repeatable")
	f.BoolVar(&o.wait, "wait", false, "show the clone's progress and wait until it ends")
	f.DurationVar(&o.timeout, "timeout", defaultSnapshotWaitTimeout, "how long --wait waits (the clone keeps going after it)")
	return cmd
}

// checkMACs applies the API's rules for an interface's mac_address, so
// that a mistake is named by the flag, not found later by the controller
// when it makes the VM.
func checkMACs(macs map[string]string) error {
	seen := map[string]string{}
	for _, iface := range slices.Sorted(maps.Keys(macs)) {
		mac := macs[iface]
		if iface == "" {
			return fmt.Errorf("--mac %q: want INTERFACE=MAC, the interface name is empty", "="+mac)
		}
		hw, err := net.ParseMAC(mac)
		switch {
		case err != nil || len(hw) != 6:
			return fmt.Errorf("--mac %s=%s: not a MAC address such as 02:00:00:00:00:01", iface, mac)
		case hw[0]&1 != 0:
			return fmt.Errorf("--mac %s=%s: not a unicast MAC address (least significant bit of the first octet set)", iface, mac)
		case hw.String() == "00:00:00:00:00:00":
			return fmt.Errorf("--mac %s=%s: must not be all zeros", iface, mac)
		case seen[hw.String()] != "":
			return fmt.Errorf("--mac %s=%s: the same address as interface %s", iface, mac, seen[hw.String()])
		}
		seen[hw.String()] = iface
	}
	return nil
}

func (o *cloneOptions) run(ctx context.Context, out, errOut io.Writer, source, target string) error {
	if err := checkMACs(o.macs); err != nil {
		return err
	}
	if o.wait {
		if err := checkWaitTimeout(o.timeout); err != nil {
			return err
		}
	}
	kind, sourceWord := apiv1.CloneSourceVM, "VM"
	if o.fromSnapshot {
		kind, sourceWord = apiv1.CloneSourceSnapshot, "snapshot"
	}
	name := o.name
	if name == "" {
		name = target + "-clone-" + stamp(o.clock.Now())
	}
	c, err := o.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	cl, err := c.Clones.Create(ctx, &apiv1.CreateCloneRequest{Clone: &apiv1.VirtualMachineClone{
		Metadata: &apiv1.ObjectMeta{Namespace: o.namespace, Name: name},
		Spec: &apiv1.VirtualMachineCloneSpec{
			SourceKind: kind, SourceName: source, Target: target,
			NewMacAddresses: o.macs, Labels: o.labels, Annotations: o.annotations,
		},
	}})
	if err != nil {
		return describeError(err, cloneResource, name)
	}
	if _, err := fmt.Fprintf(out, "clone %s of %s %s into VM %s created\n", name, sourceWord, source, target); err != nil || !o.wait {
		return err
	}

	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	last, err := cloneFollower(c, o.clock, name).wait(wctx, cl, newLineView(errOut, cloneLines).show)
	if err != nil {
		return waitFailure(ctx, wctx, err, o.timeout, cloneResource, name, clonePhase(last), "virtplane-agent get vmclone "+name+" -w")
	}
	return cloneOutcome(out, last)
}

func cloneFollower(c *client.Client, clk clock.Clock, name string) follower[*apiv1.VirtualMachineClone, *apiv1.CloneEvent] {
	return follower[*apiv1.VirtualMachineClone, *apiv1.CloneEvent]{
		what: "clone " + name,
		open: func(ctx context.Context, opts *apiv1.WatchOptions) (client.Stream[*apiv1.CloneEvent], error) {
			return c.Clones.Watch(ctx, &apiv1.WatchClonesRequest{Options: opts})
		},
		done: func(cl *apiv1.VirtualMachineClone) bool {
			p := cl.GetStatus().GetPhase()
			return p == apiv1.CloneSucceeded || p == apiv1.CloneFailed
		},
		phase: clonePhase,
		clock: clk,
	}
}

// clonePhase is the phase, Pending before the controller set one.
func clonePhase(cl *apiv1.VirtualMachineClone) string {
	if p := cl.GetStatus().GetPhase(); p != "" {
		return p
	}
	return "Pending"
}

// cloneLines describes a clone for --wait: its phase (with what it waits
// for) and the snapshot and restore it made.
func cloneLines(cl *apiv1.VirtualMachineClone) []followLine {
	st := cl.GetStatus()
	phase := clonePhase(cl)
	if p := st.GetPhase(); p != apiv1.CloneSucceeded && p != apiv1.CloneFailed {
		phase += conditionNote(st.GetConditions(), "Progressing")
	}
	lines := []followLine{{key: "phase", text: phase}}
	if s := st.GetSnapshotName(); s != "" {
		lines = append(lines, followLine{key: "snapshot", text: "  snapshot: " + s})
	}
	if r := st.GetRestoreName(); r != "" {
		lines = append(lines, followLine{key: "restore", text: "  restore: " + r})
	}
	return lines
}

// cloneOutcome reports a clone that ended: nil when it succeeded, else
// an error with the reason.
func cloneOutcome(out io.Writer, cl *apiv1.VirtualMachineClone) error {
	name, spec := cl.GetMetadata().GetName(), cl.GetSpec()
	from := "VM " + spec.GetSourceName()
	if spec.GetSourceKind() == apiv1.CloneSourceSnapshot {
		from = "snapshot " + spec.GetSourceName()
	}
	if cl.GetStatus().GetPhase() == apiv1.CloneFailed {
		reason := cl.GetStatus().GetError()
		if reason == "" {
			reason = "no reason given"
		}
		return fmt.Errorf("clone %s of %s into VM %s failed: %s", name, from, spec.GetTarget(), reason)
	}
	_, err := fmt.Fprintf(out, "VM %s cloned from %s (clone %s); it is halted: `virtplane-agent start %s` starts it\n",
		spec.GetTarget(), from, name, spec.GetTarget())
	return err
}
