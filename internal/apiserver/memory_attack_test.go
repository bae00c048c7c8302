package apiserver

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/api/validation"
	"github.com/virtplane/terraform-provider-virtplane/internal/client"
	"github.com/virtplane/terraform-provider-virtplane/internal/pki"
	"github.com/virtplane/terraform-provider-virtplane/internal/procfs"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/proc"
)

// serverProc is `virtplane-agent serve --role server` as an operator runs
// it: this tree's binary, its embedded etcd, its TLS listener on
// 127.0.0.1 and its own PKI.
type serverProc struct {
	t      *testing.T
	p      *proc.Proc
	addr   string // the TLS listener
	caFile string
	token  string
	unix   *client.Client // an admin on the root-only socket
}

func startServerProc(t *testing.T) *serverProc {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "virtplane-agent")
	if err := testutil.BuildAgent(context.Background(), bin, "rss-test"); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t, "tcp"))
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "api.sock")
	p, err := proc.Start(proc.DiesWithParent, "virtplane-agent serve --role server", filepath.Join(dir, "agent.log"), bin,
		"serve", "--role", "server", "--data-dir", data, "--socket", sock, "--listen", addr, "--metrics-listen", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(10 * time.Second) })
	s := &serverProc{t: t, p: p, addr: addr, caFile: pki.PathsIn(filepath.Join(data, "pki")).CACert}
	if s.unix, err = client.Dial(context.Background(), client.Config{Endpoint: "unix://" + sock}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.unix.Close() })
	testutil.EventuallyNoError(t, 2*time.Minute, "the server serving its socket (log "+p.Log+")", func() error {
		if !p.Alive() {
			return fmt.Errorf("exited: %w", p.Wait())
		}
		_, err := s.unix.Nodes.List(ctx(), &apiv1.ListNodesRequest{})
		return err
	})
	if s.token, err = pki.ReadToken(pki.PathsIn(filepath.Join(data, "pki")).Token); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *serverProc) dial(cfg client.Config) *client.Client {
	s.t.Helper()
	cfg.Endpoint, cfg.CAFile = s.addr, s.caFile
	c, err := client.Dial(context.Background(), cfg)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// joinNode joins name with a bootstrap token, as `node join` does, and
// returns a client that authenticates with the node certificate.
func (s *serverProc) joinNode(name string) *client.Client {
	s.t.Helper()
	tok, err := s.unix.Bootstrap.CreateToken(ctx(), &apiv1.CreateBootstrapTokenRequest{NodeName: name})
	if err != nil {
		s.t.Fatal(err)
	}
	nk, err := pki.NewNodeKey(name)
	if err != nil {
		s.t.Fatal(err)
	}
	resp, err := s.dial(client.Config{}).Bootstrap.Join(ctx(), &apiv1.JoinRequest{Token: tok.Token, NodeName: name, CsrPem: nk.CSRPEM})
	if err != nil {
		s.t.Fatal(err)
	}
	cert, err := tlsPair(resp.CertificatePem, nk)
	if err != nil {
		s.t.Fatal(err)
	}
	c := s.dial(client.Config{ClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }})
	testutil.EventuallyNoError(s.t, 30*time.Second, "the node certificate accepted", func() error {
		_, err := c.Nodes.Get(ctx(), &apiv1.GetNodeRequest{Name: name})
		if status.Code(err) == codes.NotFound {
			return nil
		}
		return err
	})
	return c
}

// memory is the server's resident set now and at its peak, in KiB.
func (s *serverProc) memory() (rss, peak int64) {
	s.t.Helper()
	m, err := procfs.ProcStatus(s.p.Pid(), "VmRSS", "VmHWM")
	if err != nil {
		s.t.Fatal(err)
	}
	return m["VmRSS"], m["VmHWM"]
}

// resetPeak sets the server's VmHWM to its current resident set
// (proc(5), clear_refs), so that the next peak is one attack's.
func (s *serverProc) resetPeak() {
	s.t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", s.p.Pid()), []byte("5"), 0); err != nil {
		s.t.Fatal(err)
	}
}

// flood makes calls, par at a time, for d, and counts their codes.
func flood(d time.Duration, par int, call func(context.Context) error) map[codes.Code]int {
	var mu sync.Mutex
	seen := map[codes.Code]int{}
	end := time.Now().Add(d)
	var wg sync.WaitGroup
	for range par {
		wg.Go(func() {
			for time.Now().Before(end) {
				c := status.Code(call(ctx()))
				mu.Lock()
				seen[c]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return seen
}

func codeCounts(seen map[codes.Code]int) string {
	var parts []string
	for c, n := range seen {
		parts = append(parts, fmt.Sprintf("%v %d", c, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// Attack parameters: 64 callers at a time for some seconds per attack,
// each sending its next request as soon as the last one is answered.
const (
	attackTime     = 3 * time.Second
	attackParallel = 64
	// attackGrowthMiB bounds the server's peak resident set over its
	// baseline through every attack below. What a refused request may
	// cost is bounded by what an identity may have in flight: 32 admin
	// requests of at most MaxRecvMsgSize (1.5 MiB) being read is 48 MiB,
	// and 16 of them decoded (a large-body method's request within its
	// limit, about 1 MiB, and its copies) about as much again; the rest
	// is the Go heap's headroom (GOGC 100). Before the fix the node's
	// attack alone took this server from 37 MiB to 423 MiB, the admin's
	// to 582 MiB (the issue saw 1.4 GB).
	attackGrowthMiB = 150
	// unreadGrowthMiB bounds the growth under an attack whose calls are
	// refused before their bodies are read (a node's calls of a method
	// it may not call): they cost their headers, and the server stays
	// flat. Measured: +0 to +1 MiB; with the tap handle's permission
	// check removed (the bodies read, then refused by size or
	// permission) +47 to +66 MiB, which attackGrowthMiB lets pass.
	unreadGrowthMiB = 16
)

// attackBody is how large the attacks' requests are: the 2 MB
// where the server reads requests that large, else the largest request
// it reads at all (anything over MaxRecvMsgSize is refused by grpc from
// the message's 5-byte header, before its body is read).
var attackBody = min(2_000_000, DefaultMaxRecvMsgSize-16<<10)

// vmWithAnnotation is a VM whose CreateVirtualMachineRequest encodes to
// about size bytes.
func vmWithAnnotation(size int) *apiv1.VirtualMachine {
	vm := validVM("big")
	vm.Metadata.Namespace = "default"
	vm.Metadata.Annotations = map[string]string{"blob": strings.Repeat("x", size)}
	n := proto.Size(&apiv1.CreateVirtualMachineRequest{Vm: vm})
	vm.Metadata.Annotations["blob"] = strings.Repeat("x", size-(n-size))
	return vm
}

// Issue 33 defect 4: a node certificate sending 2 MB bodies to a method
// it may not call took the server from 57 MB to 1.4 GB RSS, since grpc
// read and decoded each body before the permission check; an admin
// reached 1 GB the same way. The attacks run against the real server
// binary and its resident set is read from /proc.
func TestLargeBodiesDoNotGrowTheServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the agent binary")
	}
	s := startServerProc(t)
	node := s.joinNode("node-a")
	admin := s.dial(client.Config{Token: s.token})
	// Warm up what every attack goes through (TLS, the handlers, etcd).
	if _, err := admin.VMs.Create(ctx(), &apiv1.CreateVirtualMachineRequest{Vm: validVM("warm")}); err != nil {
		t.Fatal(err)
	}
	base, _ := s.memory()
	t.Logf("server baseline: VmRSS %d MiB; attack bodies %d bytes, %d callers for %s per attack",
		base>>10, attackBody, attackParallel, attackTime)

	big := vmWithAnnotation(attackBody)
	// The largest VM create a large-body method decodes: just under
	// validation's object limit (refused by validation, after decoding).
	nearLimit := vmWithAnnotation(validation.MaxObjectBytes - 1<<10)
	bigKey := &apiv1.ObjectKey{Namespace: "default", Name: strings.Repeat("x", attackBody-16)}
	attacks := []struct {
		name string
		call func(context.Context) error
		// unread: refused before any body is read (unreadGrowthMiB).
		unread bool
	}{
		{"a node creating VMs (a method it may not call)", func(c context.Context) error {
			_, err := node.VMs.Create(c, &apiv1.CreateVirtualMachineRequest{Vm: big})
			return err
		}, true},
		{"an admin getting a VM by a huge name (a small-body method)", func(c context.Context) error {
			_, err := admin.VMs.Get(c, &apiv1.GetVirtualMachineRequest{Key: bigKey})
			return err
		}, false},
		{"an admin creating huge VMs (a large-body method)", func(c context.Context) error {
			_, err := admin.VMs.Create(c, &apiv1.CreateVirtualMachineRequest{Vm: big})
			return err
		}, false},
		{"an admin creating VMs just under the object limit", func(c context.Context) error {
			_, err := admin.VMs.Create(c, &apiv1.CreateVirtualMachineRequest{Vm: nearLimit})
			return err
		}, false},
	}
	highest := base
	for _, a := range attacks {
		s.resetPeak()
		before, _ := s.memory()
		seen := flood(attackTime, attackParallel, a.call)
		_, peak := s.memory()
		highest = max(highest, peak)
		t.Logf("%s: %s; server VmRSS %d MiB before, peak VmHWM %d MiB (+%d MiB over the baseline)",
			a.name, codeCounts(seen), before>>10, peak>>10, (peak-base)>>10)
		if seen[codes.OK] > 0 {
			t.Errorf("%s: %d calls succeeded", a.name, seen[codes.OK])
		}
		if a.unread && peak-before > unreadGrowthMiB<<10 {
			t.Errorf("%s: the server grew by %d MiB, more than %d MiB: it read the refused calls' bodies",
				a.name, (peak-before)>>10, unreadGrowthMiB)
		}
	}
	if highest-base > attackGrowthMiB<<10 {
		t.Fatalf("the server grew from %d MiB to a peak of %d MiB (+%d MiB) under the attacks, more than %d MiB",
			base>>10, highest>>10, (highest-base)>>10, attackGrowthMiB)
	}
	// And it still serves.
	if _, err := admin.VMs.Get(ctx(), &apiv1.GetVirtualMachineRequest{Key: &apiv1.ObjectKey{Namespace: "default", Name: "warm"}}); err != nil {
		t.Fatal(err)
	}
}
