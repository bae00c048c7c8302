package guestnet

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// testEndpoints are a local Ceph cluster's: a monitor (v2, v1) and an
// OSD, on IPv4 and IPv6.
var testEndpoints = newEndpoints([]netip.AddrPort{
	netip.MustParseAddrPort("198.18.0.1:3300"), netip.MustParseAddrPort("198.18.0.1:6789"),
	netip.MustParseAddrPort("198.18.0.1:6800"), netip.MustParseAddrPort("[fd00::1]:6800"),
})

// TestInstallDocument pins the nft commands: replacing the table in one
// transaction, and the rules themselves. nft's own reading of them (it
// accepts them, and they block what they should) is firewall_test.go's.
func TestInstallDocument(t *testing.T) {
	got, err := json.MarshalIndent(installDocument(rules([]uint32{64055}), testEndpoints), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", "install-64055.json")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("install document differs from %s (go test -update rewrites it)\n--- got\n%s", path, got)
	}
}

func TestRulesDigest(t *testing.T) {
	a, b := rules([]uint32{64055}), rules([]uint32{107})
	if a[0].Comment == b[0].Comment {
		t.Error("the QEMU user does not change the rules' digest")
	}
	for _, r := range a {
		if !strings.HasPrefix(r.Comment, "virtplane guestnet: ") || !strings.HasSuffix(r.Comment, "["+digest(stripComments(a))+"]") {
			t.Errorf("comment %q", r.Comment)
		}
		// nft keeps at most 128 bytes of a comment.
		if len(r.Comment) > 128 {
			t.Errorf("comment %q is %d bytes", r.Comment, len(r.Comment))
		}
	}
}

func stripComments(rs []rule) []rule {
	out := make([]rule, len(rs))
	for i, r := range rs {
		r.Comment = ""
		out[i] = r
	}
	return out
}

// TestVerify reads a listing nft 1.0.6 (Debian 12) printed for the
// installed table, and the same with the changes a firewall reload or an
// operator could make.
func TestVerify(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "listing-nft-1.0.6.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := rules([]uint32{64055})
	if why, err := verify(raw, want, testEndpoints); err != nil || why != "" {
		t.Fatalf("verify(the installed table) = %q, %v", why, err)
	}
	if why, _ := verify(raw, rules([]uint32{64056}), testEndpoints); why == "" {
		t.Error("a table for another QEMU user passed")
	}
	if why, _ := verify(raw, want, testEndpoints[1:]); !strings.Contains(why, "the storage sets hold") {
		t.Errorf("a table with an endpoint more: %q", why)
	}
	if why, _ := verify(raw, want, nil); !strings.Contains(why, "the storage sets hold") {
		t.Errorf("a table with endpoints where none should be: %q", why)
	}

	for _, tc := range []struct {
		name   string
		change func(doc *map[string][]map[string]map[string]any)
		want   string
	}{
		{"a rule deleted", func(d *map[string][]map[string]map[string]any) { dropNth(d, "rule", 2) }, "chain guest_to_host holds other rules"},
		{"the jump deleted", func(d *map[string][]map[string]map[string]any) { dropNth(d, "rule", 0) }, "chain output holds other rules"},
		{"a rule added", func(d *map[string][]map[string]map[string]any) {
			(*d)["nftables"] = append((*d)["nftables"], map[string]map[string]any{"rule": {
				"family": "inet", "table": Table, "chain": chainGuest, "comment": "mine"}})
		}, "chain guest_to_host holds other rules"},
		{"the output chain gone", func(d *map[string][]map[string]map[string]any) { dropNth(d, "chain", 0) }, "chain output is missing"},
		{"the policy changed", func(d *map[string][]map[string]map[string]any) {
			nth(d, "chain", 0)["policy"] = "drop"
		}, "chain output is not a filter hook"},
		{"an endpoint removed by hand", func(d *map[string][]map[string]map[string]any) {
			s := nth(d, "set", 0)
			s["elem"] = s["elem"].([]any)[1:]
		}, "the storage sets hold"},
		{"a storage set gone", func(d *map[string][]map[string]map[string]any) { dropNth(d, "set", 1) }, "set storage6 is missing"},
		{"another set", func(d *map[string][]map[string]map[string]any) {
			(*d)["nftables"] = append((*d)["nftables"], map[string]map[string]any{"set": {
				"family": "inet", "table": Table, "name": "extra", "type": "ipv4_addr"}})
		}, "set extra is not the firewall's"},
		{"another chain", func(d *map[string][]map[string]map[string]any) {
			(*d)["nftables"] = append((*d)["nftables"], map[string]map[string]any{"chain": {
				"family": "inet", "table": Table, "name": "extra"}})
		}, "chain extra is not the firewall's"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var doc map[string][]map[string]map[string]any
			if err := json.Unmarshal(raw, &doc); err != nil {
				t.Fatal(err)
			}
			tc.change(&doc)
			b, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			why, err := verify(b, want, testEndpoints)
			if err != nil || !strings.Contains(why, tc.want) {
				t.Errorf("verify = %q, %v; want %q", why, err, tc.want)
			}
		})
	}
	if _, err := verify([]byte("{"), want, testEndpoints); err == nil {
		t.Error("a broken listing passed")
	}
}

// nth returns the n-th listed object of a kind ("rule", "chain").
func nth(d *map[string][]map[string]map[string]any, kind string, n int) map[string]any {
	for _, e := range (*d)["nftables"] {
		if o, ok := e[kind]; ok {
			if n == 0 {
				return o
			}
			n--
		}
	}
	return nil
}

func dropNth(d *map[string][]map[string]map[string]any, kind string, n int) {
	es := (*d)["nftables"]
	for i, e := range es {
		if _, ok := e[kind]; ok {
			if n == 0 {
				(*d)["nftables"] = append(es[:i:i], es[i+1:]...)
				return
			}
			n--
		}
	}
}
