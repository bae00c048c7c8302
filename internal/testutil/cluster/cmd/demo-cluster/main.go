// Command demo-cluster is `make demo-cluster`: virtplane on two private
// libvirt hosts on this machine (internal/testutil/multinode: each its own
// libvirtd in its own mount, UTS and network namespace, linked by
// link-local addresses), a server and a node agent per host. It boots the
// test guest, live-migrates it to the other node and back through the
// API, prints what each migration cost, and keeps the cluster up for the
// CLI until interrupted (-hold=false: tears down at once). Needs root.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/cluster"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/multinode"
)

const (
	namespace = "demo"
	vmName    = "mover"
)

type options struct {
	agent, launcher, guestDir string
	hold                      bool
}

func main() {
	var o options
	flag.StringVar(&o.agent, "agent", "bin/virtplane-agent", "the virtplane-agent binary")
	flag.StringVar(&o.launcher, "launcher", "bin/virtplane-launcher", "the virtplane-launcher binary")
	flag.StringVar(&o.guestDir, "guest-dir", "bin/guest", "the built test guest (make guest)")
	flag.BoolVar(&o.hold, "hold", true, "keep the cluster up until interrupted")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "demo-cluster:", err)
		os.Exit(1)
	}
}

// stderrLog prints the harness's reports.
type stderrLog struct{}

func (stderrLog) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

func run(ctx context.Context, o options) (err error) {
	for _, p := range []*string{&o.agent, &o.launcher, &o.guestDir} {
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
		if _, err := os.Stat(*p); err != nil {
			return fmt.Errorf("%w (make build guest makes it)", err)
		}
	}
	hosts, err := multinode.Launch(ctx, 2, multinode.Options{NamePrefix: "demo"}, stderrLog{})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, hosts.Close(stderrLog{}, err != nil)) }()
	dir, err := os.MkdirTemp("/tmp", "vpdemo-")
	if err != nil {
		return err
	}
	c, err := cluster.Start(ctx, hosts.Nodes(), cluster.Options{
		Agent: o.agent, Launcher: o.launcher, GuestDir: o.guestDir, Dir: dir, Namespace: namespace,
	})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			for _, f := range c.Logs() {
				fmt.Fprintf(os.Stderr, "--- %s (end)\n%s\n", f, multinode.TailFile(f, 4000))
			}
		}
		err = errors.Join(err, c.Close())
	}()
	for _, n := range c.Nodes {
		fmt.Printf("node %s: libvirtd %s, migrations to %s, joined in %s\n", n.Name, n.URI, n.Addr, n.Joined.Round(time.Millisecond))
	}
	if err := demo(ctx, c); err != nil {
		return err
	}
	if o.hold {
		fmt.Printf("\nThe cluster stays up until Ctrl-C. Try:\n"+
			"  %s --endpoint unix://%s -n %s get vms\n"+
			"  %s --endpoint unix://%s -n %s console %s\n"+
			"  %s --endpoint unix://%s -n %s migrate %s --wait\n",
			o.agent, c.Servers[0].Socket, namespace, o.agent, c.Servers[0].Socket, namespace, vmName, o.agent, c.Servers[0].Socket, namespace, vmName)
		<-ctx.Done()
		fmt.Println("tearing down")
	}
	return nil
}

// demo boots the guest and migrates it away and back.
func demo(ctx context.Context, c *cluster.Cluster) error {
	vm := testguest.VM(namespace, vmName, apiv1.RunStrategyAlways, c.Nodes[0].Kernel, "160Mi", "virtplane.tick")
	if _, err := c.API.VMs.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: vm}); err != nil {
		return err
	}
	began := time.Now()
	vmi, err := waitVMI(ctx, c, func(v *apiv1.VirtualMachineInstance) bool {
		return v.GetStatus().GetPhase() == apiv1.PhaseRunning &&
			apiv1.IsConditionTrue(v.GetStatus().GetConditions(), apiv1.ConditionLiveMigratable)
	})
	if err != nil {
		return fmt.Errorf("VM %s did not start: %w", vmName, err)
	}
	fmt.Printf("VM %s running on %s after %s (instance %s)\n", vmName, vmi.GetStatus().GetNodeName(),
		time.Since(began).Round(time.Millisecond), vmi.GetMetadata().GetUid())
	// Its console through the API, as `virtplane-agent console` reads
	// it: one stream that follows the guest from node to node.
	con, err := openConsole(ctx, c)
	if err != nil {
		return err
	}
	defer con.close()
	if _, err := con.waitTick(ctx, 0); err != nil {
		return err
	}
	for range 2 {
		if err := migrate(ctx, c); err != nil {
			return err
		}
		// A tick printed after the move, in the same stream.
		last, err := con.waitTick(ctx, con.lastTick()+3)
		if err != nil {
			return err
		}
		fmt.Printf("  the console stream goes on: %s\n", last)
	}
	sum, err := con.summary()
	if err != nil {
		return err
	}
	fmt.Printf("console: %s\n", sum)
	return nil
}

// migrate moves the VM to the other node and prints what it cost.
func migrate(ctx context.Context, c *cluster.Cluster) error {
	vmi, err := getVMI(ctx, c)
	if err != nil {
		return err
	}
	from := vmi.GetStatus().GetNodeName()
	var to string
	for _, n := range c.Nodes {
		if n.Name != from {
			to = n.Name
		}
	}
	m, err := c.API.VMs.Migrate(ctx, &apiv1.MigrateVirtualMachineRequest{
		Key: &apiv1.ObjectKey{Namespace: namespace, Name: vmName}, AddedNodeSelector: map[string]string{apiv1.LabelNodeName: to}})
	if err != nil {
		return err
	}
	name := m.GetMetadata().GetName()
	began := time.Now()
	for {
		m, err = c.API.Migrations.Get(ctx, &apiv1.GetMigrationRequest{Key: &apiv1.ObjectKey{Namespace: namespace, Name: name}})
		if err != nil {
			return err
		}
		if apiv1.IsMigrationFinal(m.GetStatus().GetPhase()) {
			break
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	if ph := m.GetStatus().GetPhase(); ph != apiv1.MigrationSucceeded {
		return fmt.Errorf("migration %s ended %s: %s: %s", name, ph, m.GetStatus().GetReason(), m.GetStatus().GetMessage())
	}
	p := m.GetStatus().GetMigrationState().GetProgress()
	var phases []string
	for _, t := range m.GetStatus().GetPhaseTransitionTimestamps() {
		phases = append(phases, t.GetPhase())
	}
	fmt.Printf("migrated %s → %s in %s: libvirt job %d ms, downtime %d ms, %d MiB copied (%s)\n", from, to,
		time.Since(began).Round(time.Millisecond), p.GetElapsedMs(), p.GetDowntimeMs(), p.GetDataProcessedBytes()>>20,
		strings.Join(phases, " → "))
	return nil
}

func getVMI(ctx context.Context, c *cluster.Cluster) (*apiv1.VirtualMachineInstance, error) {
	return c.API.VMIs.Get(ctx, &apiv1.GetVirtualMachineInstanceRequest{Key: &apiv1.ObjectKey{Namespace: namespace, Name: vmName}})
}

// waitVMI polls the VM's instance until ok, for at most 3 minutes (the
// test guest boots in seconds under TCG).
func waitVMI(ctx context.Context, c *cluster.Cluster, ok func(*apiv1.VirtualMachineInstance) bool) (*apiv1.VirtualMachineInstance, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		v, err := getVMI(ctx, c)
		if err == nil && ok(v) {
			return v, nil
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return v, fmt.Errorf("%w (last: %v)", err, v.GetStatus())
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
