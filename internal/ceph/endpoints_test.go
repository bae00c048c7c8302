package ceph_test

import (
	"encoding/json"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/virtplane/terraform-provider-virtplane/internal/ceph"
)

// TestEndpointsAreThePublicAddresses: with only the class's 'profile rbd'
// user, the endpoints are the mon's v2 and v1 addresses and the OSD's
// public ones, as the admin sees them in the maps, and none of the OSD's
// cluster or heartbeat addresses.
func TestEndpointsAreThePublicAddresses(t *testing.T) {
	cn, c := conn(t, "mon", "profile rbd", "osd", "profile rbd pool=vp")
	ctx := t.Context()
	start := time.Now()
	got, err := cn.Endpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("endpoints %v in %v", got, time.Since(start).Round(time.Millisecond))

	out, err := c.Admin(ctx, "ceph", "osd", "dump", "--format", "json")
	if err != nil {
		t.Fatal(err)
	}
	type vec struct {
		Addrvec []struct{ Addr string } `json:"addrvec"`
	}
	var osdmap struct {
		OSDs []struct {
			Public  vec `json:"public_addrs"`
			Cluster vec `json:"cluster_addrs"`
			HBBack  vec `json:"heartbeat_back_addrs"`
			HBFront vec `json:"heartbeat_front_addrs"`
		} `json:"osds"`
	}
	if err := json.Unmarshal(out, &osdmap); err != nil || len(osdmap.OSDs) == 0 {
		t.Fatalf("admin's osd dump: %v (%d OSDs)", err, len(osdmap.OSDs))
	}
	mon := netip.MustParseAddrPort(c.Monitors()[0])
	want := []netip.AddrPort{mon, netip.AddrPortFrom(mon.Addr(), 6789)}
	for _, o := range osdmap.OSDs {
		for _, a := range o.Public.Addrvec {
			want = append(want, netip.MustParseAddrPort(a.Addr))
		}
		for _, v := range []vec{o.Cluster, o.HBBack, o.HBFront} {
			for _, a := range v.Addrvec {
				if slices.Contains(got, netip.MustParseAddrPort(a.Addr)) {
					t.Errorf("endpoints %v hold OSD-to-OSD address %s", got, a.Addr)
				}
			}
		}
	}
	want = ceph.SortEndpoints(want)
	if !slices.Equal(got, want) {
		t.Errorf("endpoints %v, want %v", got, want)
	}

	// A monitor nobody listens on: the cause, within the bound.
	bad := *cn
	bad.Monitors = []string{netip.AddrPortFrom(mon.Addr(), 3999).String()}
	start = time.Now()
	_, err = bad.Endpoints(ctx)
	if took := time.Since(start); !errors.Is(err, ceph.ErrUnreachable) || took > ceph.ConnectTimeout+10*time.Second {
		t.Errorf("endpoints of an unreachable cluster: %v after %v, want %v within %v", err, took, ceph.ErrUnreachable, ceph.ConnectTimeout+10*time.Second)
	}
}

// TestCheckCephx: the test cluster requires cephx (auth_*_required =
// cephx), so a client offering none is refused, and the check passes,
// quickly and without a key.
func TestCheckCephx(t *testing.T) {
	cn, _ := conn(t, "mon", "profile rbd", "osd", "profile rbd pool=vp")
	start := time.Now()
	if err := cn.CheckCephx(t.Context()); err != nil {
		t.Fatalf("check: %v", err)
	}
	t.Logf("cephx required: checked in %v", time.Since(start).Round(time.Millisecond))
	noKey := *cn
	noKey.KeyFile = "/nonexistent"
	if err := noKey.CheckCephx(t.Context()); err != nil {
		t.Errorf("the check used the key file: %v", err)
	}
}

func TestQEMUConf(t *testing.T) {
	conf := string(ceph.QEMUConf())
	for _, want := range []string{"[global]\n", "client_mount_timeout = 10\n", "rados_mon_op_timeout = 10\n"} {
		if !strings.Contains(conf, want) {
			t.Errorf("QEMU's conf lacks %q:\n%s", want, conf)
		}
	}
	// Bounding OSD operations would fail a running guest's I/O when an
	// OSD stalls (docs/notes/storage-probes.md).
	if strings.Contains(conf, "osd_op_timeout") || strings.Contains(conf, "key") {
		t.Errorf("QEMU's conf:\n%s", conf)
	}
}
