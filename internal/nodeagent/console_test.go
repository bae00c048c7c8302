package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/apiserver"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/console"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/console/consoletest"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// testConsole is a client's console stream, collected in the background.
type testConsole struct {
	t      *testing.T
	stream apiv1.Consoles_AttachClient
	cancel context.CancelFunc
	mu     sync.Mutex
	data   strings.Builder
	notes  []string
	err    error // how the stream ended
	done   chan struct{}
}

func (h *harness) attach(open *apiv1.ConsoleOpen) *testConsole {
	h.t.Helper()
	return h.attachThrough(h.api.Consoles, open)
}

// attachThrough opens a console through the API server api.
func (h *harness) attachThrough(api apiv1.ConsolesClient, open *apiv1.ConsoleOpen) *testConsole {
	h.t.Helper()
	ctx, cancel := context.WithCancel(h.ctx)
	stream, err := api.Attach(ctx)
	if err != nil {
		cancel()
		h.t.Fatal(err)
	}
	if err := stream.Send(&apiv1.ConsoleInput{Open: open}); err != nil {
		cancel()
		h.t.Fatal(err)
	}
	c := &testConsole{t: h.t, stream: stream, cancel: cancel, done: make(chan struct{})}
	h.t.Cleanup(cancel)
	go func() {
		defer close(c.done)
		for {
			out, err := stream.Recv()
			c.mu.Lock()
			if err != nil {
				c.err = err
				c.mu.Unlock()
				return
			}
			c.data.Write(out.GetData())
			if n := out.GetNotice(); n != "" {
				c.notes = append(c.notes, n)
			}
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *testConsole) output() (string, []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.data.String(), append([]string(nil), c.notes...)
}

func (c *testConsole) waitData(substr string) {
	c.t.Helper()
	testutil.EventuallyNoError(c.t, waitTimeout, fmt.Sprintf("console output %q", substr), func() error {
		data, notes := c.output()
		if strings.Contains(data, substr) {
			return nil
		}
		return fmt.Errorf("data %q, notices %q, stream end %v", data, notes, c.endErr())
	})
}

func (c *testConsole) waitNotice(substr string) {
	c.t.Helper()
	testutil.EventuallyNoError(c.t, waitTimeout, fmt.Sprintf("console notice %q", substr), func() error {
		data, notes := c.output()
		for _, n := range notes {
			if strings.Contains(n, substr) {
				return nil
			}
		}
		return fmt.Errorf("data %q, notices %q, stream end %v", data, notes, c.endErr())
	})
}

// waitEnd waits until the API ended the stream and returns its error
// (nil for a clean end).
func (c *testConsole) waitEnd() error {
	c.t.Helper()
	select {
	case <-c.done:
	case <-time.After(waitTimeout):
		data, notes := c.output()
		c.t.Fatalf("console did not end: data %q, notices %q", data, notes)
	}
	if err := c.endErr(); !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

func (c *testConsole) endErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func withOwnerVM(vm *apiv1.VirtualMachine) vmiOption {
	return func(v *apiv1.VirtualMachineInstance) {
		v.Metadata.OwnerReferences = []*apiv1.OwnerReference{{
			Kind: apiv1.KindVirtualMachine, Name: vm.Metadata.Name, Uid: vm.Metadata.Uid, Controller: true,
		}}
	}
}

// The whole console path in one process: the real API routes sessions to
// the node agent over its Sessions stream; the agent serves the kept log,
// follows the live one, ends sessions when the instance ends, keeps the
// log under the VM, and serves it from there afterwards.
// With several servers, the node keeps a sessions stream with each: a
// console opened through any of them reaches the guest.
func TestConsoleThroughEveryServer(t *testing.T) {
	h := newHarness(t)
	second := client.New(testutil.ServeGRPC(t, apiserver.New(h.stores, apiserver.Options{Logger: testLogger(t)}).Register))
	h.runAgent(func(o *Options) { o.API.Consoles = []console.API{h.api.Consoles, second.Consoles} })
	vm, err := h.stores.VMs.Create(h.ctx, &apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web"}})
	if err != nil {
		t.Fatal(err)
	}
	h.createVMI("web", withOwnerVM(vm), withGrace(0))
	uid := h.waitPhase("web", apiv1.PhaseRunning).GetMetadata().GetUid()
	consoletest.WriteLog(t, nodedir.ConsoleLogPath(h.vmiDir(uid)), "BOOTED\n")
	for i, api := range []apiv1.ConsolesClient{h.api.Consoles, second.Consoles} {
		c := h.attachThrough(api, &apiv1.ConsoleOpen{Name: "web", Log: true})
		c.waitData("BOOTED\n")
		if err := c.waitEnd(); err != nil {
			t.Fatalf("console through server %d ended with %v", i+1, err)
		}
	}
}

func TestConsoleSessionsThroughTheAPI(t *testing.T) {
	h := newHarness(t)
	a, _ := h.runAgent()
	vm, err := h.stores.VMs.Create(h.ctx, &apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "web"}})
	if err != nil {
		t.Fatal(err)
	}
	h.createVMI("web", withOwnerVM(vm), withGrace(0))
	vmi := h.waitPhase("web", apiv1.PhaseRunning)
	uid := vmi.GetMetadata().GetUid()
	path := nodedir.ConsoleLogPath(h.vmiDir(uid))
	consoletest.WriteLog(t, path, "BOOTED\n")

	// Nothing but the log exists so far: a VM that never ran is refused.
	if _, err := h.stores.VMs.Create(h.ctx, &apiv1.VirtualMachine{Metadata: &apiv1.ObjectMeta{Namespace: "default", Name: "never"}}); err != nil {
		t.Fatal(err)
	}
	never := h.attach(&apiv1.ConsoleOpen{Name: "never", Log: true})
	if err := never.waitEnd(); status.Code(err) != codes.NotFound || !strings.Contains(err.Error(), "has not run on any node") {
		t.Fatalf("console of a VM that never ran: %v", err)
	}
	if err := h.attach(&apiv1.ConsoleOpen{}).waitEnd(); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "open.name") {
		t.Fatalf("console without a name: %v", err)
	}

	logCon := h.attach(&apiv1.ConsoleOpen{Name: "web", Log: true, Follow: true})
	logCon.waitData("BOOTED\n")
	consoletest.AppendLog(t, path, "more\n")
	logCon.waitData("BOOTED\nmore\n")

	// Without log, only what is written from now on. When the session
	// starts is not observable, so lines are written until one arrives.
	live := h.attach(&apiv1.ConsoleOpen{Name: "web", Follow: true})
	ticks := 0
	testutil.Eventually(t, waitTimeout, "the live console shows a line written after it started", func() bool {
		if data, _ := live.output(); strings.Contains(data, "tick") {
			return true
		}
		consoletest.AppendLog(t, path, fmt.Sprintf("tick %d\n", ticks))
		ticks++
		return false
	})
	if data, _ := live.output(); strings.Contains(data, "BOOTED") {
		t.Errorf("live console without log showed old output: %q", data)
	}

	// The fake launcher reports no pty: the console stays read-only.
	inter := h.attach(&apiv1.ConsoleOpen{Name: "web", Interactive: true, Follow: true})
	inter.waitNotice("read-only console")
	inter.cancel()

	consoletest.AppendLog(t, path, "the end\n")
	h.deleteVMI("web")
	for _, c := range []*testConsole{logCon, live} {
		c.waitData("the end\n")
		c.waitNotice(console.NoticeInstanceEnded)
		if err := c.waitEnd(); err != nil {
			t.Fatalf("console ended with %v", err)
		}
	}
	keptDir, err := a.layout.KeptLogDir(vm.Metadata.Uid, uid)
	if err != nil {
		t.Fatal(err)
	}
	kept := nodedir.ConsoleLogPath(keptDir)
	testutil.Eventually(t, waitTimeout, "the log kept under the VM", func() bool { _, err := os.Stat(kept); return err == nil })

	// The VMI is still there, final: its kept log is served.
	testutil.Eventually(t, waitTimeout, "the VMI final", func() bool { return apiv1.IsFinal(h.phase("web")) })
	whole, err := os.ReadFile(kept)
	if err != nil {
		t.Fatal(err)
	}
	ended := h.attach(&apiv1.ConsoleOpen{Name: "web", Log: true, Follow: true, TailBytes: 13})
	if err := ended.waitEnd(); err != nil {
		t.Fatal(err)
	}
	if data, notes := ended.output(); data != string(whole[len(whole)-13:]) || len(notes) != 1 || notes[0] != console.NoticeInstanceEnded {
		t.Fatalf("ended instance's log, last 13 bytes: %q, notices %q; log %q", data, notes, whole)
	}
	if err := h.attach(&apiv1.ConsoleOpen{Name: "web", Interactive: true}).waitEnd(); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("interactive console of an ended instance: %v", err)
	}

	// The VMI gone: the VM's last node serves its newest kept log.
	h.updateVMI("web", func(v *apiv1.VirtualMachineInstance) { v.Metadata.Finalizers = nil })
	testutil.Eventually(t, waitTimeout, "the VMI gone", func() bool { _, err := h.stores.VMIs.Get(h.ctx, "default", "web"); return err != nil })
	if _, err := h.stores.VMs.GuaranteedUpdate(h.ctx, "default", "web", func(v *apiv1.VirtualMachine) (*apiv1.VirtualMachine, error) {
		v = proto.Clone(v).(*apiv1.VirtualMachine)
		v.Status = &apiv1.VirtualMachineStatus{NodeName: testNode}
		return v, nil
	}); err != nil {
		t.Fatal(err)
	}
	last := h.attach(&apiv1.ConsoleOpen{Name: "web", Log: true})
	if err := last.waitEnd(); err != nil {
		t.Fatal(err)
	}
	if data, _ := last.output(); !strings.HasPrefix(data, "BOOTED\nmore\n") || !strings.HasSuffix(data, "the end\n") {
		t.Fatalf("VM's last log: %q", data)
	}
	plain := h.attach(&apiv1.ConsoleOpen{Name: "web", Follow: true})
	plain.waitNotice("not running")
	if err := plain.waitEnd(); err != nil {
		t.Fatal(err)
	}
}

// Without a node agent holding a Sessions stream, the API says so.
func TestConsoleNodeNotConnected(t *testing.T) {
	h := newHarness(t)
	h.createVMI("lone")
	err := h.attach(&apiv1.ConsoleOpen{Name: "lone", Follow: true}).waitEnd()
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "node "+testNode+" is not connected for consoles") {
		t.Fatalf("console of a VMI on a node without agent: %v", err)
	}
}

// A followed console ends once its instance migrated away, although the
// node keeps the instance's record (marked) until it removes what the
// instance left: the console must not stay on a node the guest left,
// showing nothing, nor take up a later stay's new log as if it were the
// same one.
func TestConsoleEndsWhenTheInstanceMigratedAway(t *testing.T) {
	h := newHarness(t)
	a, _ := h.runAgent()
	h.createVMI("mover", withGrace(0))
	vmi := h.waitPhase("mover", apiv1.PhaseRunning)
	uid := vmi.GetMetadata().GetUid()
	path := nodedir.ConsoleLogPath(h.vmiDir(uid))
	consoletest.WriteLog(t, path, "BOOTED\n")
	con := h.attach(&apiv1.ConsoleOpen{Name: "mover", Log: true, Follow: true})
	con.waitData("BOOTED\n")

	rec, err := a.db.GetVMI(uid)
	if err != nil {
		t.Fatal(err)
	}
	rec.MigratedAway = "migration-1"
	if err := a.db.PutVMI(rec); err != nil {
		t.Fatal(err)
	}
	con.waitNotice(console.NoticeInstanceEnded)
	if err := con.waitEnd(); err != nil {
		t.Fatalf("console ended with %v", err)
	}
	if _, err := a.db.GetVMI(uid); err != nil {
		t.Fatalf("the record was removed (%v); the test wants it kept, marked", err)
	}
}
