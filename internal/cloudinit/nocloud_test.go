package cloudinit

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var testSeed = Seed{
	InstanceID:    "6c5d7b0e-3f4a-4b8e-9a51-2f0e7d9c1a22",
	Hostname:      "web-1",
	UserData:      "#cloud-config\nhostname: web-1\nruncmd:\n  - echo hello\n",
	NetworkConfig: "version: 2\nethernets:\n  eth0:\n    dhcp4: true\n",
}

func buildSeed(t *testing.T, s Seed) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := BuildNoCloudISO(&buf, s); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func parseSeed(t *testing.T, img []byte) *parsedISO {
	t.Helper()
	p, err := parseISO(img)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func asStrings(m map[string][]byte) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

func TestBuildNoCloudISO(t *testing.T) {
	img := buildSeed(t, testSeed)
	p := parseSeed(t, img)

	want := map[string]string{
		"meta-data":      "instance-id: 6c5d7b0e-3f4a-4b8e-9a51-2f0e7d9c1a22\nlocal-hostname: web-1\n",
		"user-data":      testSeed.UserData,
		"network-config": testSeed.NetworkConfig,
	}
	if p.label != "cidata" || p.jolietLabel != "cidata" {
		t.Errorf("labels = %q (primary), %q (Joliet), want cidata", p.label, p.jolietLabel)
	}
	if got := asStrings(p.rockRidge); !maps.Equal(got, want) {
		t.Errorf("Rock Ridge files = %q\nwant %q", got, want)
	}
	if got := asStrings(p.joliet); !maps.Equal(got, want) {
		t.Errorf("Joliet files = %q\nwant %q", got, want)
	}
	if got := slices.Sorted(maps.Keys(p.plain)); !slices.Equal(got, []string{"META_DAT.;1", "NETWORK_.;1", "USER_DAT.;1"}) {
		t.Errorf("ISO 9660 identifiers = %q", got)
	}
	if !slices.Equal(p.extensions, []string{"RRIP_1991A"}) {
		t.Errorf("extensions = %q, want RRIP_1991A", p.extensions)
	}
	for name, mode := range p.rrMode {
		if mode != 0o100444 {
			t.Errorf("%s: mode %o, want 100444", name, mode)
		}
	}
	// Small seeds stay small: padded to 64 sectors (128 KiB).
	if p.sectors != 64 {
		t.Errorf("image has %d sectors, want 64", p.sectors)
	}
}

func TestBuildNoCloudISOWithoutNetworkConfig(t *testing.T) {
	s := testSeed
	s.NetworkConfig = ""
	s.Hostname = ""
	s.UserData = "" // an empty user-data file is still written
	p := parseSeed(t, buildSeed(t, s))
	want := map[string]string{
		"meta-data": "instance-id: 6c5d7b0e-3f4a-4b8e-9a51-2f0e7d9c1a22\n",
		"user-data": "",
	}
	if got := asStrings(p.rockRidge); !maps.Equal(got, want) {
		t.Errorf("Rock Ridge files = %q, want %q", got, want)
	}
	if got := asStrings(p.joliet); !maps.Equal(got, want) {
		t.Errorf("Joliet files = %q, want %q", got, want)
	}
}

func TestBuildNoCloudISOLargeUserData(t *testing.T) {
	s := testSeed
	// Several sectors, not a multiple of 2048, so the last one is partial.
	s.UserData = "#cloud-config\nwrite_files:\n" + strings.Repeat("  - path: /etc/x\n    content: abcdefgh\n", 3000)
	p := parseSeed(t, buildSeed(t, s))
	if got := string(p.rockRidge["user-data"]); got != s.UserData {
		t.Errorf("user-data differs: %d bytes read, %d written", len(got), len(s.UserData))
	}
	if got := string(p.rockRidge["network-config"]); got != s.NetworkConfig {
		t.Errorf("network-config after large user-data = %q", got)
	}
}

func TestBuildNoCloudISODeterministic(t *testing.T) {
	a, b := buildSeed(t, testSeed), buildSeed(t, testSeed)
	if !bytes.Equal(a, b) {
		t.Fatal("same seed, different bytes")
	}
	epoch := testSeed
	epoch.ModTime = time.Unix(0, 0).In(time.FixedZone("x", 5*3600))
	if !bytes.Equal(a, buildSeed(t, epoch)) {
		t.Error("zero ModTime should mean the epoch, in any time zone")
	}
	other := testSeed
	other.ModTime = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	if bytes.Equal(a, buildSeed(t, other)) {
		t.Error("ModTime does not reach the image")
	}
	other = testSeed
	other.InstanceID = "other"
	if bytes.Equal(a, buildSeed(t, other)) {
		t.Error("instance ID does not reach the image")
	}
}

func TestSeedMetaData(t *testing.T) {
	tests := []struct {
		name    string
		seed    Seed
		want    string
		wantErr string
	}{
		{"both", Seed{InstanceID: "i-1", Hostname: "vm"}, "instance-id: i-1\nlocal-hostname: vm\n", ""},
		{"no hostname", Seed{InstanceID: "i-1"}, "instance-id: i-1\n", ""},
		// Unquoted, YAML would read these as a number and a boolean.
		{"quoted", Seed{InstanceID: "123", Hostname: "yes"}, "instance-id: \"123\"\nlocal-hostname: \"yes\"\n", ""},
		{"missing instance id", Seed{Hostname: "vm"}, "", "instance ID is required"},
		{"newline", Seed{InstanceID: "i-1", Hostname: "vm\nevil: 1"}, "", "control characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.seed.MetaData()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("MetaData() = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
	if err := BuildNoCloudISO(&bytes.Buffer{}, Seed{}); err == nil {
		t.Error("BuildNoCloudISO accepted a seed without instance ID")
	}
}

func TestWriteNoCloudISO(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cidata.iso")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteNoCloudISO(path, 0o600, testSeed); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, buildSeed(t, testSeed)) {
		t.Error("file differs from BuildNoCloudISO's output")
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}

	// A failed build leaves the old file alone and no temporary behind.
	if err := WriteNoCloudISO(path, 0o600, Seed{}); err == nil {
		t.Fatal("no error for a seed without instance ID")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "cidata.iso" {
		t.Errorf("directory holds %v, want only cidata.iso", entries)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, got) {
		t.Error("failed write changed the existing file")
	}
	if err := WriteNoCloudISO(filepath.Join(dir, "missing", "x.iso"), 0o600, testSeed); err == nil {
		t.Error("no error for a missing directory")
	}
}
