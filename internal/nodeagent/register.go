package nodeagent

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
)

// node builds the Node the agent registers: capacity from the host,
// allocatable less the reserved memory, and what the host can run.
func (a *Agent) node(ctx context.Context) *apiv1.Node {
	h := a.host
	probeCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	probe, err := a.opts.Tools.Probe(probeCtx, a.opts.LibvirtURI)
	if err != nil {
		// A node without a working launcher still registers: its
		// versions stay empty, and launches fail with the reason.
		a.log.Warn("launcher probe failed; libvirt and QEMU versions unknown", "err", err)
	}
	reserved := a.opts.ReservedMemory.Value()
	alloc := max(h.MemoryBytes-reserved, 0)
	cpus := strconv.Itoa(h.CPUs)
	return &apiv1.Node{
		Metadata: &apiv1.ObjectMeta{
			Name:   a.opts.NodeName,
			Labels: ownLabels(a.opts.Labels, h.KVMUsable),
		},
		Status: &apiv1.NodeStatus{
			Capacity:    map[string]string{"cpu": cpus, "memory": bytesQuantity(h.MemoryBytes)},
			Allocatable: map[string]string{"cpu": cpus, "memory": bytesQuantity(alloc)},
			Schedulable: true,
			// Where migrations to this node go: the server builds each
			// destination from it.
			MigrationAddress: a.opts.Migration.Address,
			// Where exports of this node are served, and the one
			// certificate their clients trust (package export).
			ExportAddress:     a.opts.ExportAddress,
			ExportCertificate: string(a.exportCert),
			NodeInfo: &apiv1.NodeInfo{
				Hostname:       h.Hostname,
				AgentVersion:   a.opts.AgentVersion,
				LibvirtVersion: probe.LibvirtVersion,
				QemuVersion:    probe.QEMUVersion,
				KvmUsable:      h.KVMUsable,
				KernelVersion:  h.KernelVersion,
				Architecture:   h.Architecture,
			},
		},
	}
}

// ownLabels are the labels a node registers with, all a node may set:
// the configured ones and LabelKVM.
func ownLabels(configured map[string]string, kvm bool) map[string]string {
	l := maps.Clone(configured)
	if l == nil {
		l = map[string]string{}
	}
	l[apiv1.LabelKVM] = strconv.FormatBool(kvm)
	return l
}

// CheckLabels refuses labels a node agent is configured to register with
// (serve --node-labels) that the server would refuse, before the agent
// joins or registers: only the node's own labels, under
// apiv1.NodeLabelPrefix, and not LabelKVM, which the agent sets.
func CheckLabels(labels map[string]string) error {
	p := field.NewPath("node-labels")
	for k := range labels {
		if validation.NodeLabelKey(k) == apiv1.LabelKVM {
			return field.Forbidden(p.Key(k), "the node agent sets "+apiv1.LabelKVM+" from what the host can do")
		}
	}
	// As the node registers them: with LabelKVM.
	return validation.ValidateNodeOwnedLabels(ownLabels(labels, true), p).ToAggregate()
}

func bytesQuantity(b int64) string {
	return resource.NewQuantity(b, resource.BinarySI).String()
}

// register creates or refreshes the Node, retrying until it succeeds or
// ctx ends: a control plane that is not up yet is no reason to exit.
func (a *Agent) register(ctx context.Context) error {
	n := a.node(ctx)
	// Registering replaces the stored lists, with empty ones when the
	// first listings are not ready: sent then records that. Both wait at
	// once, so registration waits for the slower one only.
	var images *apiv1.NodeImageList
	var nets *apiv1.NodeNetworkInventory
	var wg sync.WaitGroup
	wg.Go(func() { images = a.images.ForRegister(ctx, registerImageWait) })
	wg.Go(func() { nets = a.networks.ForRegister(ctx, registerImageWait) })
	wg.Wait()
	n.Status.Images = images.GetItems()
	n.Status.Bridges, n.Status.Networks = nets.GetBridges(), nets.GetNetworks()
	err := retry(ctx, a, "registering node", func() error {
		_, err := a.nodes.Register(ctx, &apiv1.RegisterNodeRequest{Node: n})
		return err
	})
	if err == nil {
		if images == nil {
			images = &apiv1.NodeImageList{}
		}
		a.images.MarkSent(images)
		if nets == nil {
			nets = &apiv1.NodeNetworkInventory{}
		}
		a.networks.MarkSent(nets)
	}
	return err
}

// registerImageWait bounds how long registration waits for the first
// listings. A node whose new images take longer to hash registers without
// them, and a heartbeat brings them when they are ready; so with its
// network inventory.
const registerImageWait = 5 * time.Second

// retry calls fn with backoff (100 ms doubling to 5 s) until it succeeds
// or ctx ends.
func retry(ctx context.Context, a *Agent, what string, fn func() error) error {
	backoff := 100 * time.Millisecond
	for {
		err := fn()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		a.log.Warn(what+" failed; retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w", what, err)
		case <-a.opts.Clock.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}
