//go:build libvirt

package virt

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver"
)

const systemSocket = "/run/libvirt/libvirt-sock"

// sockProxy forwards a unix socket to libvirtd's and can cut every
// connection, which the client sees exactly like a libvirtd restart —
// without restarting the daemon other tests share.
type sockProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
}

func newSockProxy(t *testing.T, path string) *sockProxy {
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	p := &sockProxy{ln: ln}
	t.Cleanup(func() { _ = ln.Close(); p.drop() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("unix", systemSocket)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
	return p
}

func (p *sockProxy) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// TestReconnectAfterDaemonLoss cuts the connection under a Connection and
// checks that it comes back by itself and that lifecycle events flow again
// on the new connection.
func TestReconnectAfterDaemonLoss(t *testing.T) {
	requireLibvirt(t)
	if _, err := os.Stat(systemSocket); err != nil {
		t.Skipf("no system libvirtd socket: %v", err)
	}
	p := newSockProxy(t, filepath.Join(t.TempDir(), "libvirt-sock"))
	uri := "qemu+unix:///system?socket=" + p.ln.Addr().String()

	conn, events := openWithEvents(t, uri)
	wait := func(what string, match func(driver.Event) bool) {
		t.Helper()
		timeout := time.After(30 * time.Second)
		for {
			select {
			case e := <-events:
				if match(e) {
					return
				}
			case <-timeout:
				t.Fatalf("no %s within 30s", what)
			}
		}
	}

	name := fmt.Sprintf("vp-rc-%d", time.Now().UnixNano()%1_000_000_000)
	v := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "it", Name: name, Uid: "u"},
		Spec:     &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "64Mi"}}},
	}
	def, err := domxml.Build(v, &launcherpb.SyncOptions{DomainName: name})
	if err != nil {
		t.Fatal(err)
	}
	x, _ := def.Marshal()
	dom, err := conn.DomainDefineXML(x)
	if err != nil {
		t.Fatal(err)
	}
	dom.Free()
	t.Cleanup(func() {
		if d, err := conn.LookupDomainByName(name); err == nil {
			_ = d.Undefine()
			d.Free()
		}
	})
	wait("Defined event", func(e driver.Event) bool { return e.Domain == name && e.Type == 0 })

	p.drop()
	wait("reconnect", func(e driver.Event) bool { return e.Kind == driver.EventReconnected })

	d, err := conn.LookupDomainByName(name)
	if err != nil {
		t.Fatalf("lookup after reconnect: %v", err)
	}
	defer d.Free()
	if err := d.Undefine(); err != nil {
		t.Fatal(err)
	}
	wait("Undefined event on the new connection", func(e driver.Event) bool { return e.Domain == name && e.Type == 1 })
}
