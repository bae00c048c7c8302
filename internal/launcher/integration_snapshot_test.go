package launcher

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"libvirt.org/go/libvirtxml"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
	"github.com/virtplane/terraform-provider-virtplane/internal/testutil"
)

// An online snapshot of a real guest's persistent volume: the launcher
// freezes the guest through its agent (when it has one), moves the
// volume's writes to an overlay, the test copies the volume with
// `qemu-img convert -U` as the node agent does, and CommitDisks merges the
// overlay back. The guest ticks throughout.

// volumeDisk is the source file of the domain's disk dev, and its backing
// file, from the live XML.
func (e *env) volumeDisk(dev string) (src, backing string) {
	e.t.Helper()
	out, err := exec.Command("virsh", "-c", e.uri, "dumpxml", e.domain).Output()
	if err != nil {
		e.t.Fatalf("virsh dumpxml: %v", err)
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(string(out)); err != nil {
		e.t.Fatal(err)
	}
	for _, d := range def.Devices.Disks {
		if d.Target == nil || d.Target.Dev != dev || d.Source == nil || d.Source.File == nil {
			continue
		}
		if b := d.BackingStore; b != nil && b.Source != nil && b.Source.File != nil {
			backing = b.Source.File.File
		}
		return d.Source.File.File, backing
	}
	e.t.Fatalf("no disk %s in %s", dev, out)
	return "", ""
}

// ticks are the guest's tick counters so far.
func (e *env) ticks() []int {
	b, _ := os.ReadFile(filepath.Join(e.dir, "console.log"))
	return testguest.Ticks(string(b))
}

// waitTicksPast waits until the guest ticked past n.
func (e *env) waitTicksPast(n int) int {
	e.t.Helper()
	var last int
	testutil.EventuallyNoError(e.t, guestBootTimeout, fmt.Sprintf("a tick past %d", n), func() error {
		ts := e.ticks()
		if len(ts) == 0 || ts[len(ts)-1] <= n {
			return fmt.Errorf("ticks %v", ts)
		}
		last = ts[len(ts)-1]
		return nil
	})
	return last
}

func TestOnlineSnapshotOfAVolume(t *testing.T) {
	for _, tc := range []struct {
		name  string
		agent bool
		want  string
	}{
		{"guest agent", true, apiv1.IndicationGuestAgent},
		{"no guest agent", false, apiv1.IndicationNoGuestAgent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			g := installGuest(t)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()

			vdir := testguest.ReachableDir(t, "vp-launcher-snap-")
			vol := filepath.Join(vdir, "data.qcow2")
			if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", vol, "16M").CombinedOutput(); err != nil {
				t.Fatalf("qemu-img create: %v: %s", err, out)
			}
			opts := []testguest.Option{testguest.Hostname("vp-it-snap"), testguest.Extra("virtplane.tick")}
			if tc.agent {
				opts = append(opts, testguest.GuestAgent())
			}
			so := e.guestOpts(g, testguest.Cmdline(opts...))
			so.Disks = []*launcherpb.DiskSource{{Name: "data", Path: vol, Format: "qcow2", Device: "disk", Bus: "virtio"}}
			c, _ := e.launch(ctx)
			v := e.vmi(apiv1.PhaseScheduled)
			v.Spec.Domain.Memory.Guest = "160Mi"
			st, err := c.Sync(ctx, v, so)
			wantState(t, st, err, "Running", "Booted")
			if tc.agent {
				e.waitConsole(testguest.MarkerGuestAgentUp)
				testutil.EventuallyNoError(t, guestBootTimeout, "the guest agent connected", func() error {
					st, err := c.GetDomain(ctx)
					if err != nil || !st.GetGuestAgentConnected() {
						return fmt.Errorf("status %v, %v", st, err)
					}
					return nil
				})
			}
			before := e.waitTicksPast(0)

			disk := &launcherpb.SnapshotDisk{Path: vol, OverlayPath: vol + ".snap-test"}
			resp, err := c.SnapshotDisks(ctx, &launcherpb.SnapshotDisksRequest{Disks: []*launcherpb.SnapshotDisk{disk}, Freeze: true})
			if err != nil {
				t.Fatalf("SnapshotDisks: %v", err)
			}
			if want := []string{apiv1.IndicationOnline, tc.want}; !slices.Equal(resp.GetIndications(), want) {
				t.Errorf("indications = %v, want %v", resp.GetIndications(), want)
			}
			if src, back := e.volumeDisk("vda"); src != disk.OverlayPath || back != vol {
				t.Fatalf("after the snapshot vda = %s over %s, want the overlay over the volume", src, back)
			}
			if tc.agent {
				b, _ := os.ReadFile(filepath.Join(e.dir, "console.log"))
				if n := testguest.CountMarker(string(b), testguest.MarkerGuestAgentFreeze); n != 2 {
					t.Errorf("%d freeze markers on the console, want frozen then thawed", n)
				}
				if rest, _ := testguest.FindMarker(string(b), testguest.MarkerGuestAgentFreeze); rest != "state=frozen" {
					t.Errorf("first freeze marker %q", rest)
				}
			}

			// The copy, as the node agent makes it.
			cp := filepath.Join(t.TempDir(), "copy.qcow2")
			if out, err := exec.Command("qemu-img", "convert", "-U", "-q", "-f", "qcow2", "-O", "qcow2", vol, cp).CombinedOutput(); err != nil {
				t.Fatalf("copy: %v: %s", err, out)
			}
			if out, err := exec.Command("qemu-img", "check", "-q", cp).CombinedOutput(); err != nil {
				t.Errorf("qemu-img check of the copy: %v: %s", err, out)
			}

			for range 2 { // idempotent
				if err := c.CommitDisks(ctx, &launcherpb.CommitDisksRequest{Disks: []*launcherpb.SnapshotDisk{disk}}); err != nil {
					t.Fatalf("CommitDisks: %v", err)
				}
			}
			if src, back := e.volumeDisk("vda"); src != vol || back != "" {
				t.Errorf("after the commit vda = %s over %q, want the volume alone", src, back)
			}
			if _, err := os.Stat(disk.OverlayPath); !os.IsNotExist(err) {
				t.Errorf("overlay left: %v", err)
			}
			// The guest kept running and still does.
			e.waitTicksPast(before + 10)
			st, err = c.GetDomain(ctx)
			if err != nil || st.GetState() != "Running" {
				t.Errorf("domain %v, %v after the snapshot", st, err)
			}
			if b, _ := os.ReadFile(filepath.Join(e.dir, "console.log")); strings.Contains(string(b), "VIRTPLANE-GUEST-CRASH") {
				t.Error("the guest crashed")
			}
		})
	}
}
