package command

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// The test binary doubles as the agent binary, so the crash test runs the
// real `serve` command in a child process it can SIGKILL.
func TestMain(m *testing.M) {
	if os.Getenv("VIRTPLANE_TEST_RUN_AGENT") == "1" {
		cmd := NewRootCommand()
		cmd.SetArgs(os.Args[1:])
		if err := cmd.Execute(); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

type agentProc struct {
	cmd *exec.Cmd
	log *testutil.SyncBuffer
}

func startAgentProc(t *testing.T, dataDir, socket string, extra ...string) *agentProc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Role server: the store is under test, and a node agent would refuse
	// to start in a test's temporary dir, which QEMU cannot reach.
	args := append([]string{"serve", "--role", "server", "--data-dir", dataDir, "--socket", socket, "--metrics-listen", "", "--log-level", "warn"}, extra...)
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "VIRTPLANE_TEST_RUN_AGENT=1")
	var log testutil.SyncBuffer // written by exec's copying goroutine
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &agentProc{cmd: cmd, log: &log}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	testutil.EventuallyNoError(t, time.Minute, "the agent to serve", func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := client.Dial(ctx, client.Config{Endpoint: "unix://" + socket})
		if err != nil {
			return err
		}
		defer c.Close()
		if _, err = c.VMs.List(ctx, &apiv1.ListVirtualMachinesRequest{}); err != nil {
			return fmt.Errorf("%w; log:\n%s", err, log.String())
		}
		return nil
	})
	return p
}

func crashVM(name string) *apiv1.VirtualMachine {
	return &apiv1.VirtualMachine{
		Metadata: &apiv1.ObjectMeta{Name: name},
		Spec: &apiv1.VirtualMachineSpec{
			RunStrategy: "Halted",
			Template: &apiv1.VirtualMachineInstanceTemplateSpec{Spec: &apiv1.VirtualMachineInstanceSpec{
				Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "128Mi"}},
			}},
		},
	}
}

// Every write the agent acknowledged survives a SIGKILL that follows it
// immediately, with the same uid and resource version.
func TestAcknowledgedWritesSurviveSIGKILL(t *testing.T) {
	dir := t.TempDir()
	dataDir, socket := filepath.Join(dir, "data"), filepath.Join(dir, "agent.sock")
	// Controllers off: their own writes would move resource versions on
	// after the acknowledgements this test compares against.
	p := startAgentProc(t, dataDir, socket, "--controllers=false")

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := client.Dial(ctx, client.Config{Endpoint: "unix://" + socket})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		acked = map[string]*apiv1.ObjectMeta{}
		wg    sync.WaitGroup
	)
	// Concurrent writers: creates, then an update of each; the kill lands
	// right after the last acknowledgement.
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 15; i++ {
				name := fmt.Sprintf("vm-%d-%d", w, i)
				vm, err := c.VMs.Create(ctx, &apiv1.CreateVirtualMachineRequest{Vm: crashVM(name)})
				if err != nil {
					t.Errorf("create %s: %v", name, err)
					return
				}
				if i%2 == 0 {
					vm.Spec.RunStrategy = "Always"
					if vm, err = c.VMs.Update(ctx, &apiv1.UpdateVirtualMachineRequest{Vm: vm}); err != nil {
						t.Errorf("update %s: %v", name, err)
						return
					}
				}
				mu.Lock()
				acked[name] = vm.Metadata
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
	c.Close()
	if t.Failed() {
		return
	}

	startAgentProc(t, dataDir, socket, "--controllers=false")
	c2, err := client.Dial(ctx, client.Config{Endpoint: "unix://" + socket})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	list, err := c2.VMs.List(ctx, &apiv1.ListVirtualMachinesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != len(acked) {
		t.Fatalf("have %d VMs after restart, acknowledged %d", len(list.Items), len(acked))
	}
	for _, vm := range list.Items {
		want := acked[vm.Metadata.Name]
		if want == nil {
			t.Errorf("unexpected VM %s", vm.Metadata.Name)
			continue
		}
		if vm.Metadata.Uid != want.Uid || vm.Metadata.ResourceVersion != want.ResourceVersion {
			t.Errorf("%s: uid/rv %s/%d after restart, acknowledged %s/%d", vm.Metadata.Name,
				vm.Metadata.Uid, vm.Metadata.ResourceVersion, want.Uid, want.ResourceVersion)
		}
	}
}
