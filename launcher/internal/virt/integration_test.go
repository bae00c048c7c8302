//go:build libvirt

package virt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/domxml"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver"
	"github.com/virtplane/terraform-provider-virtplane/launcher/internal/driver/drivertest"
)

// testURI is libvirt's in-process test driver: define, start, pause,
// destroy, metadata and events, without QEMU.
const testURI = "test:///default"

func requireLibvirt(t *testing.T) {
	t.Helper()
	if os.Getenv("VIRTPLANE_TEST_LIBVIRT_URI") == "" {
		t.Skip("VIRTPLANE_TEST_LIBVIRT_URI is not set")
	}
}

// openWithEvents opens uri with its events in a channel; when the channel
// is full they are dropped, as the launcher drops them.
func openWithEvents(t *testing.T, uri string) (*Connection, chan driver.Event) {
	t.Helper()
	events := make(chan driver.Event, 64)
	conn, err := Open(uri, Options{Events: func(e driver.Event) {
		select {
		case events <- e:
		default:
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn, events
}

// TestDriverAgainstLibvirtTestDriver runs the driver through the real
// bindings: the fake's assumptions about libvirt are checked here.
func TestDriverAgainstLibvirtTestDriver(t *testing.T) {
	requireLibvirt(t)
	conn, events := openWithEvents(t, testURI)

	name := fmt.Sprintf("vp-it-%d", time.Now().UnixNano())
	uid := "uid-" + name
	d, err := driver.New(conn, events, driver.Config{DomainName: name, VMIUID: uid, QEMUPidDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	ctx := context.Background()
	empty := &launcherpb.Empty{}

	sub := drivertest.NewStream(ctx)
	go func() { _ = d.Events(empty, sub) }()
	if ev := sub.Next(t); ev.GetEvent() != "Current" || ev.GetStatus().GetExists() {
		t.Fatalf("first event = %v", ev)
	}

	v := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "it", Name: name, Uid: uid},
		Spec:     &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "64Mi"}}},
		Status:   &apiv1.VirtualMachineInstanceStatus{Phase: apiv1.PhaseScheduled},
	}
	st, err := d.Sync(ctx, &launcherpb.SyncRequest{Vmi: v, Options: &launcherpb.SyncOptions{DomainName: name}})
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if st.GetState() != "Running" || st.GetVmiUid() != uid || st.GetUuid() == "" {
		t.Fatalf("after Sync: %v", st)
	}
	sub.WaitFor(t, "Started/Booted")

	st, err = d.Pause(ctx, empty)
	if err != nil || st.GetState() != "Paused" || st.GetReason() != "User" || !st.GetPausedByUser() {
		t.Fatalf("Pause = %v, %v", st, err)
	}
	sub.WaitFor(t, "Suspended/Paused")
	// The mark is in libvirt's copy of the metadata, where a new launcher
	// would read it.
	if st, err = d.Sync(ctx, &launcherpb.SyncRequest{Vmi: v}); err != nil || st.GetState() != "Paused" {
		t.Fatalf("Sync of a user-paused domain = %v, %v", st, err)
	}
	st, err = d.Unpause(ctx, empty)
	if err != nil || st.GetState() != "Running" || st.GetPausedByUser() {
		t.Fatalf("Unpause = %v, %v", st, err)
	}
	sub.WaitFor(t, "Resumed/Unpaused")

	if _, err := d.Delete(ctx, empty); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Delete while running = %v", err)
	}
	st, err = d.Kill(ctx, empty)
	if err != nil || st.GetState() != "Shutoff" || st.GetReason() != "Destroyed" {
		t.Fatalf("Kill = %v, %v", st, err)
	}
	sub.WaitFor(t, "Stopped/Destroyed")
	st, err = d.Delete(ctx, empty)
	if err != nil || st.GetExists() {
		t.Fatalf("Delete = %v, %v", st, err)
	}
	sub.WaitFor(t, "Undefined/Removed")
	if _, err := conn.LookupDomainByName(name); err == nil {
		t.Fatal("domain still defined")
	}
}

func TestMetadataThroughLibvirt(t *testing.T) {
	requireLibvirt(t)
	conn, err := Open(testURI, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	name := fmt.Sprintf("vp-md-%d", time.Now().UnixNano())
	v := &apiv1.VirtualMachineInstance{
		Metadata: &apiv1.ObjectMeta{Namespace: "ns", Name: "n", Uid: "u"},
		Spec:     &apiv1.VirtualMachineInstanceSpec{Domain: &apiv1.DomainSpec{Memory: &apiv1.Memory{Guest: "64Mi"}}},
	}
	def, err := domxml.Build(v, &launcherpb.SyncOptions{DomainName: name})
	if err != nil {
		t.Fatal(err)
	}
	x, err := def.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	dom, err := conn.DomainDefineXML(x)
	if err != nil {
		t.Fatal(err)
	}
	defer dom.Free()
	t.Cleanup(func() { _ = dom.Undefine() })

	read := func() domxml.Metadata {
		t.Helper()
		s, err := dom.GetMetadata(domxml.Namespace)
		if err != nil {
			t.Fatal(err)
		}
		md, err := domxml.ParseMetadata(s)
		if err != nil {
			t.Fatal(err)
		}
		return md
	}
	if md := read(); md.UID != "u" || md.Namespace != "ns" || md.Name != "n" || md.GracePeriodSeconds != 30 {
		t.Fatalf("defined metadata = %+v", md)
	}
	md := read()
	md.PausedByUser, md.ShutdownRequestedAt = true, 42
	el, _ := md.MarshalElement()
	if err := dom.SetMetadata(el, domxml.NamespacePrefix, domxml.Namespace); err != nil {
		t.Fatal(err)
	}
	if got := read(); !got.PausedByUser || got.ShutdownRequestedAt != 42 || got.UID != "u" {
		t.Fatalf("metadata after set = %+v", got)
	}
	if _, err := dom.GetMetadata("https://example.com/other"); err == nil || !errors.Is(err, driver.ErrNoMetadata) {
		t.Fatalf("foreign namespace = %v", err)
	}
	if _, err := conn.LookupDomainByName(name + "-absent"); !errors.Is(err, driver.ErrNoDomain) {
		t.Fatalf("absent lookup = %v", err)
	}
}
