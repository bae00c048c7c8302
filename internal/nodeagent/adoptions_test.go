package nodeagent

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/state"
)

// Before its take-over an adopted domain is not the instance's: the
// handler sees no domain (and so never stops or removes it); after, it
// is the instance's like any other.
func TestNotTakenOver(t *testing.T) {
	adopted := &state.VMI{UID: "vmi-1", AdoptedUUID: "dom-uuid"}
	plain := &state.VMI{UID: "vmi-1"}
	foreign := &launcherpb.DomainStatus{Exists: true, Name: "legacy", State: "Running"}
	taken := &launcherpb.DomainStatus{Exists: true, Name: "legacy", State: "Running", VmiUid: "vmi-1"}
	if got := notTakenOver(adopted, foreign); got.GetExists() {
		t.Errorf("a domain not taken over yet: %v", got)
	}
	if got := notTakenOver(adopted, taken); got != taken {
		t.Errorf("a domain taken over: %v", got)
	}
	if got := notTakenOver(plain, foreign); got != foreign {
		t.Errorf("a domain of an instance that adopts nothing: %v", got)
	}
	if got := notTakenOver(adopted, nil); got.GetExists() {
		t.Errorf("no domain: %v", got)
	}
}

func TestAdoptedInstanceIsNotLiveMigratable(t *testing.T) {
	vmi := &apiv1.VirtualMachineInstance{Spec: &apiv1.VirtualMachineInstanceSpec{}}
	if c := liveMigratable(vmi, &state.VMI{AdoptedUUID: "u"}); c.GetStatus() != apiv1.ConditionFalse || c.GetReason() != ReasonAdopted {
		t.Errorf("adopted: %v", c)
	}
	if c := liveMigratable(vmi, &state.VMI{}); c.GetStatus() != apiv1.ConditionTrue {
		t.Errorf("not adopted: %v", c)
	}
}

// The inspection of a domain to adopt runs the node's launcher binary on
// its libvirtd and reads the QEMU pid where the launchers are told to (a
// libvirtd in a private mount namespace writes it elsewhere than the
// default).
func TestInspectorUsesTheNodesPidDir(t *testing.T) {
	script := filepath.Join(t.TempDir(), "virtplane-launcher")
	body := `#!/bin/sh
[ "$*" = "inspect-domain --libvirt-uri test:///default --qemu-pid-dir /run/private/qemu -- legacy" ] || { echo "args: $*" >&2; exit 2; }
echo '{"name":"legacy","uuid":"u","state":"Running","persistent":true,"qemu_pid":4242,"xml":"<domain/>"}'
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	i := inspector{Options{LauncherPath: script, LibvirtURI: "test:///default", QEMUPidDir: "/run/private/qemu"}}
	f, err := i.InspectDomain(context.Background(), "legacy")
	if err != nil || f.QEMUPid != 4242 || f.UUID != "u" {
		t.Fatalf("inspect-domain %+v, %v", f, err)
	}
}
