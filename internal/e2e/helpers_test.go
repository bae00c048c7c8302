package e2e

import (
	"context"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/nodeagent/nodedir"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
)

// What the single-node cluster and the multi-node one have in common.

// nsAPI is a test's view of the API: its client, and the namespace no
// other test uses.
type nsAPI struct {
	t   *testing.T
	ctx context.Context
	ns  string
	api *client.Client
}

func (c *nsAPI) key(name string) *apiv1.ObjectKey {
	return &apiv1.ObjectKey{Namespace: c.ns, Name: name}
}

// domain is the libvirt domain name of VM name's instance.
func (c *nsAPI) domain(name string) string { return apiv1.DomainName(c.ns, name) }

func (c *nsAPI) vm(name string) *apiv1.VirtualMachine {
	c.t.Helper()
	vm, err := c.api.VMs.Get(c.ctx, &apiv1.GetVirtualMachineRequest{Key: c.key(name)})
	if err != nil {
		c.t.Fatalf("getting VM %s: %v", name, err)
	}
	return vm
}

// vmi returns the VM's instance, or nil when there is none.
func (c *nsAPI) vmi(name string) *apiv1.VirtualMachineInstance {
	c.t.Helper()
	v, err := c.api.VMIs.Get(c.ctx, &apiv1.GetVirtualMachineInstanceRequest{Key: c.key(name)})
	if status.Code(err) == codes.NotFound {
		return nil
	}
	if err != nil {
		c.t.Fatalf("getting VMI %s: %v", name, err)
	}
	return v
}

// guestVM is the test guest as a VM in namespace ns (testguest.VM).
func guestVM(ns, name, strategy, kernel, cmdline string) *apiv1.VirtualMachine {
	return testguest.VM(ns, name, strategy, kernel, guestMemory, cmdline)
}

// consoles are the serial consoles of one node's VMIs, by VMI uid, each
// followed from the first time it is asked for until closeAll.
type consoles struct {
	mu    sync.Mutex
	byUID map[string]*console
}

// follow returns the console of VMI uid, which has its directory under
// the node agent's --node-data-dir nodeDir.
func (cs *consoles) follow(t *testing.T, nodeDir, uid string) *console {
	t.Helper()
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if con := cs.byUID[uid]; con != nil {
		return con
	}
	d, err := nodedir.Layout{Root: nodeDir}.VMIDir(uid)
	if err != nil {
		t.Fatal(err)
	}
	con := followConsole(t, nodedir.ConsoleLogPath(d))
	if cs.byUID == nil {
		cs.byUID = map[string]*console{}
	}
	cs.byUID[uid] = con
	return con
}

func (cs *consoles) closeAll() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, con := range cs.byUID {
		con.close()
	}
}

// logMatches returns the lines of the log file that match re; none when
// the file cannot be read.
func logMatches(file string, re *regexp.Regexp) []string {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if re.MatchString(line) {
			out = append(out, line)
		}
	}
	return out
}
