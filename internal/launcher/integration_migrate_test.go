package launcher

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/multinode"
)

// Live migration between two real libvirt hosts (private libvirtds of the
// multinode harness), launcher to launcher, without the control plane:
// the target's launcher defines the receiving domain, the source's runs
// libvirt's job, and the guest goes A → B → A.

// envOn is an env whose launchers talk to node's libvirtd, for domain.
func envOn(t *testing.T, node *multinode.Node, domain string) *env {
	e := &env{t: t, uri: node.URI, bin: launcherBinary(t), dir: t.TempDir(), domain: domain}
	opts := e.opts()
	opts.QEMUPidDir = node.QEMUPidDir()
	e.m = NewManager(opts)
	t.Cleanup(e.cleanup)
	return e
}

func TestLauncherLiveMigration(t *testing.T) {
	requireLibvirt(t)
	nodes := multinode.Start(t, 2, multinode.Options{})
	domain := fmt.Sprintf("vp-mig-%d", time.Now().UnixNano()%1_000_000_000)
	ea, eb := envOn(t, nodes[0], domain), envOn(t, nodes[1], domain)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	ca, _, st := ea.launchRunning(ctx, "")
	uuid := st.GetUuid()
	cb, _ := eb.launch(ctx)

	// A → B.
	first := migrate(ctx, t, "mig-1", ca, cb, eb, nodes[1], uuid)
	if first.GetProgress().GetDowntimeMs() <= 0 || first.GetProgress().GetDataTotalBytes() <= 0 {
		t.Errorf("completed migration without job statistics: %v", first)
	}
	t.Logf("A → B: %d ms elapsed, %d ms downtime, %d MiB total", first.GetProgress().GetElapsedMs(),
		first.GetProgress().GetDowntimeMs(), first.GetProgress().GetDataTotalBytes()>>20)
	wantDomain(ctx, t, nodes[0], domain, "shut off")
	wantDomain(ctx, t, nodes[1], domain, "running")
	onB, err := cb.GetDomain(ctx)
	wantState(t, onB, err, "Running", "Migrated")
	if onB.GetUuid() != uuid || onB.GetQemuPid() <= 0 {
		t.Fatalf("target domain %v, want uuid %s with a QEMU", onB, uuid)
	}
	// The same uid never runs twice.
	again, err := ca.Migrate(ctx, &launcherpb.MigrateRequest{MigrationUid: "mig-1", TargetLibvirtUri: nodes[1].TCPURI,
		TargetAddress: nodes[1].Addr, DestXml: "<domain/>"})
	if err != nil || !again.GetCompleted() || again.GetFailed() {
		t.Fatalf("Migrate again with the same uid = %v, %v; want the completed record", again, err)
	}
	// A Sync on the target adopts the migrated domain as its own.
	synced, err := cb.Sync(ctx, eb.vmi(apiv1.PhaseRunning), eb.syncOpts())
	wantState(t, synced, err, "Running", "Migrated")

	// The source's instance ends as the node agent ends one: delete.
	if st, err := ca.Delete(ctx); err != nil || st.GetExists() {
		t.Fatalf("Delete on the source after the migration = %v, %v", st, err)
	}

	// B → A, through the same launcher on A, now a target.
	back := migrate(ctx, t, "mig-2", cb, ca, ea, nodes[0], uuid)
	t.Logf("B → A: %d ms elapsed, %d ms downtime", back.GetProgress().GetElapsedMs(), back.GetProgress().GetDowntimeMs())
	wantDomain(ctx, t, nodes[0], domain, "running")
	wantDomain(ctx, t, nodes[1], domain, "shut off")
}

// TestLauncherRefusesForeignDestinations: the launcher hands libvirt only
// a destination the server could have built. A qemu+ext URI would have
// the source host's libvirtd run its command as root (the marker file);
// Migrate refuses it, and every other foreign one, before libvirt sees
// it, and the guest runs on.
func TestLauncherRefusesForeignDestinations(t *testing.T) {
	requireLibvirt(t)
	nodes := multinode.Start(t, 1, multinode.Options{})
	domain := fmt.Sprintf("vp-dest-%d", time.Now().UnixNano()%1_000_000_000)
	e := envOn(t, nodes[0], domain)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c, _, _ := e.launchRunning(ctx, "")
	xml, err := nodes[0].Virsh(ctx, "dumpxml", "--migratable", domain)
	if err != nil {
		t.Fatal(err)
	}

	dir, err := os.MkdirTemp("/tmp", "vp-ext-") // every node's libvirtd sees /tmp
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	marker, script := filepath.Join(dir, "ran-as"), filepath.Join(dir, "ext-command")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nid -u > "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	const foreign = "192.0.2.254"
	for i, tc := range []struct{ uri, addr string }{
		{"qemu+ext://" + foreign + "/system?command=" + script, foreign},
		{"qemu+tcp://" + foreign + ":16509/system?command=" + script, foreign},
		{nodes[0].TCPURI, foreign},
	} {
		uid := fmt.Sprintf("mig-bad-%d", i)
		st, err := c.Migrate(ctx, &launcherpb.MigrateRequest{MigrationUid: uid, TargetLibvirtUri: tc.uri, TargetAddress: tc.addr, DestXml: xml})
		if err == nil {
			// What it leads to: libvirt's job, to that destination.
			testutil.Eventually(t, 2*time.Minute, "migration "+uid+" to end", func() bool {
				st, err = c.GetMigration(ctx)
				return err == nil && st.GetCompleted()
			})
			ran, _ := os.ReadFile(marker)
			t.Fatalf("Migrate to %s (address %s) started libvirt's job, which ended %v; the command ran as uid %q (marker %s)",
				tc.uri, tc.addr, st, strings.TrimSpace(string(ran)), marker)
		}
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "target_libvirt_uri") {
			t.Fatalf("Migrate to %s (address %s): %v; want InvalidArgument naming target_libvirt_uri", tc.uri, tc.addr, err)
		}
	}
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("marker %s: %v; the command ran", marker, err)
	}
	wantDomain(ctx, t, nodes[0], domain, "running")
}

// migrate runs one migration from src to dst (dst's env e, on node) and
// returns the source's final status.
func migrate(ctx context.Context, t *testing.T, uid string, src, dst Client, e *env, node *multinode.Node, uuid string) *launcherpb.MigrationStatus {
	t.Helper()
	vmi := e.vmi(apiv1.PhaseRunning)
	vmi.Status.DomainUuid = uuid
	vmi.Status.NodeName = node.Name
	in, err := dst.Incoming(ctx, uid, vmi, e.syncOpts(), time.Minute)
	if err != nil {
		t.Fatalf("Incoming on %s: %v", node.Name, err)
	}
	if in.GetRole() != "target" || !in.GetRunning() || !strings.Contains(in.GetDomainXml(), uuid) {
		t.Fatalf("Incoming = %v, want a waiting target with the domain's XML", in)
	}
	wantDomain(ctx, t, node, e.domain, "shut off")
	start := time.Now()
	st, err := src.Migrate(ctx, &launcherpb.MigrateRequest{
		MigrationUid:     uid,
		TargetLibvirtUri: node.TCPURI,
		TargetAddress:    node.Addr,
		DestXml:          in.GetDomainXml(),
		DataBytes:        128 << 20,
		Configuration: &apiv1.MigrationConfiguration{
			CompletionTimeoutPerGibSeconds: 150, ProgressTimeoutSeconds: 150, MaxDowntimeMs: 300,
		},
	})
	if err != nil {
		t.Fatalf("Migrate %s: %v", uid, err)
	}
	if !st.GetRunning() || st.GetRole() != "source" {
		t.Fatalf("Migrate = %v, want a running source", st)
	}
	testutil.Eventually(t, 2*time.Minute, "migration "+uid+" to end", func() bool {
		st, err = src.GetMigration(ctx)
		return err == nil && st.GetCompleted()
	})
	if st.GetFailed() {
		t.Fatalf("migration %s failed: %s", uid, st.GetFailureReason())
	}
	t.Logf("migration %s to %s: %s wall clock", uid, node.Name, time.Since(start).Round(time.Millisecond))
	return st
}

func wantDomain(ctx context.Context, t *testing.T, node *multinode.Node, domain, state string) {
	t.Helper()
	got, err := node.DomainState(ctx, domain)
	if err != nil || !strings.HasPrefix(got, state) {
		t.Fatalf("domain %s on %s is %q (%v), want %s", domain, node.Name, got, err, state)
	}
}
