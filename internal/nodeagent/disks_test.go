package nodeagent

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/disks"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// fakeDisks is a disk room that prepares nothing: it returns opts (a
// copy) or err.
type fakeDisks struct {
	opts *launcherpb.SyncOptions
	err  error
}

func (f fakeDisks) Prepare(context.Context, *apiv1.VirtualMachineInstance, *state.VMI) (*launcherpb.SyncOptions, error) {
	if f.err != nil {
		return nil, f.err
	}
	return proto.Clone(f.opts).(*launcherpb.SyncOptions), nil
}

func (f fakeDisks) GrowVolumes(context.Context, *apiv1.VirtualMachineInstance, *state.VMI) error {
	return f.err
}

func (f fakeDisks) PrepareIncoming(ctx context.Context, vmi *apiv1.VirtualMachineInstance, rec *state.VMI) (*launcherpb.SyncOptions, error) {
	return f.Prepare(ctx, vmi, rec)
}

// The domain is built from the disk room's files plus what the agent
// knows: KVM, the domain name and the node failure policy.
func TestSyncOptionsAddTheAgentsFacts(t *testing.T) {
	files := &launcherpb.SyncOptions{ConsoleLogPath: "/node/vmis/u1/console.log", KernelPath: "/images/vmlinuz",
		Disks: []*launcherpb.DiskSource{{Name: "root", Path: "/node/vmis/u1/disks/root.qcow2"}}}
	a := &handler{disks: fakeDisks{opts: files}, host: &HostFacts{KVMUsable: true}}
	rec := &state.VMI{UID: "u1", DomainName: "default_vm", NodeFailurePolicy: apiv1.NodeFailurePolicyRestartElsewhere}
	opts, err := a.syncOptions(context.Background(), &apiv1.VirtualMachineInstance{}, rec)
	if err != nil {
		t.Fatal(err)
	}
	if !opts.Kvm || opts.DomainName != "default_vm" || opts.NodeFailurePolicy != apiv1.NodeFailurePolicyRestartElsewhere {
		t.Errorf("options %+v: want KVM, the record's domain name and policy", opts)
	}
	if opts.ConsoleLogPath != files.ConsoleLogPath || opts.KernelPath != files.KernelPath || len(opts.Disks) != 1 {
		t.Errorf("options %+v lost the prepared files %+v", opts, files)
	}

	a.disks = fakeDisks{err: &disks.Error{Reason: disks.ReasonPrepareFailed, Err: errors.New("no image")}}
	var de *disks.Error
	if _, err := a.syncOptions(context.Background(), &apiv1.VirtualMachineInstance{}, rec); !errors.As(err, &de) {
		t.Errorf("a preparation error came back as %v", err)
	}
}
