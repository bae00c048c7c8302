package domxml

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
	"github.com/virtplane/terraform-provider-virtplane/internal/launcher/launcherpb"
)

func TestTapName(t *testing.T) {
	a := TapName("6f1c0e1e-4d7b-4d55-9a43-1b2f3c4d5e6f", "lan")
	if len(a) != 15 || !strings.HasPrefix(a, "vp") {
		t.Errorf("TapName = %q: want 15 bytes starting with vp (Linux's limit; not libvirt's vnet)", a)
	}
	if b := TapName("6f1c0e1e-4d7b-4d55-9a43-1b2f3c4d5e6f", "lan"); b != a {
		t.Errorf("TapName is not deterministic: %q, %q", a, b)
	}
	for _, other := range []string{TapName("6f1c0e1e-4d7b-4d55-9a43-1b2f3c4d5e6f", "wan"), TapName("another-uid", "lan")} {
		if other == a {
			t.Errorf("two interfaces share the tap name %q", a)
		}
	}
}

func TestParseLiveNetwork(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "live_network.xml"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseLiveNetwork(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	want := LiveNetwork{
		Interfaces: []LiveInterface{
			{Name: "default", Kind: KindUser, MAC: "02:00:00:00:00:01", Alias: "ua-net-default"},
			{Name: "lan", Kind: KindBridge, MAC: "02:00:00:00:00:02", Alias: "ua-net-lan", Tap: "vp71f31e6e744be", Bridge: "br0"},
			{Name: "nat", Kind: KindNetwork, MAC: "02:00:00:00:00:03", Alias: "ua-net-nat", Tap: "vpe84bf18025f06", Bridge: "virbr1", Network: "isolated"},
			// Not virtplane's: no name, the MAC in lower case.
			{Kind: KindUser, MAC: "52:54:00:aa:bb:cc", Alias: "net3"},
		},
		AgentConnected: true,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseLiveNetwork =\n%+v\nwant\n%+v", got, want)
	}
	if li := got.Interface("lan"); li == nil || li.Tap != "vp71f31e6e744be" {
		t.Errorf("Interface(lan) = %+v", li)
	}
	if li := got.Interface("nope"); li != nil {
		t.Errorf("Interface(nope) = %+v", li)
	}
	if NetdevID("ua-net-default") != "hostua-net-default" {
		t.Error(NetdevID("ua-net-default"))
	}

	disconnected := strings.Replace(string(raw), "state='connected'", "state='disconnected'", 1)
	if got, err := ParseLiveNetwork(disconnected); err != nil || got.AgentConnected {
		t.Errorf("a disconnected channel: %+v, %v", got.AgentConnected, err)
	}
	if _, err := ParseLiveNetwork("<domain"); err == nil {
		t.Error("broken XML parsed")
	}
}

// TestBuildLiveRoundTrip: what Build defines is what ParseLiveNetwork
// reads back, so the launcher finds its interfaces by the spec's names.
func TestBuildLiveRoundTrip(t *testing.T) {
	v := testVMI("64Mi")
	v.Spec.Networks = []*apiv1.Network{
		{Name: "default", User: &apiv1.UserNetwork{}},
		{Name: "lan", Bridge: &apiv1.BridgeNetwork{Bridge: "br0", Vlan: 10}},
	}
	v.Spec.Domain.Devices = &apiv1.Devices{Interfaces: []*apiv1.Interface{
		{Name: "default", MacAddress: "02:00:00:00:00:0A"},
		{Name: "lan", MacAddress: "02:00:00:00:00:0b"},
	}}
	dom, err := Build(v, &launcherpb.SyncOptions{DomainName: "d"})
	if err != nil {
		t.Fatal(err)
	}
	x, err := dom.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseLiveNetwork(x)
	if err != nil {
		t.Fatal(err)
	}
	want := []LiveInterface{
		{Name: "default", Kind: KindUser, MAC: "02:00:00:00:00:0a", Alias: "ua-net-default"},
		{Name: "lan", Kind: KindBridge, MAC: "02:00:00:00:00:0b", Alias: "ua-net-lan", Tap: TapName(v.Metadata.Uid, "lan"), Bridge: "br0"},
	}
	if !reflect.DeepEqual(got.Interfaces, want) || got.AgentConnected {
		t.Errorf("read back %+v, want %+v and no agent yet", got, want)
	}
}
