package testguest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/testguest"
)

// TestGuestAgentProtocol runs the guest agent stand-in (ga.sh, on stdin
// and stdout) under busybox, whose sh and awk the guest runs, with
// requests as libvirt sends them, and reads the replies as JSON in
// qemu-ga's shapes.
func TestGuestAgentProtocol(t *testing.T) {
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox not installed (scripts/install-deps.sh test installs busybox-static)")
	}
	script := filepath.Join(t.TempDir(), "ga.sh")
	if err := os.WriteFile(script, []byte(testguest.GuestAgentScript), 0o755); err != nil {
		t.Fatal(err)
	}
	requests := strings.Join([]string{
		// libvirt's sync; a 0xFF byte before a request is dropped.
		"\xff{\"execute\":\"guest-sync\", \"arguments\":{\"id\":1700000000123}}",
		`{"execute": "guest-sync-delimited", "arguments": {"id": 42}}`,
		`{"execute":"guest-ping"}`,
		`{"execute":"guest-info"}`,
		`{"execute":"guest-network-get-interfaces"}`,
		`{"execute":"guest-shutdown","arguments":{"mode":"powerdown"}}`,
		`not json at all`,
	}, "\n") + "\n"
	cmd := exec.Command(busybox, "sh", script, "-")
	cmd.Stdin = strings.NewReader(requests)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("guest agent: %v\n%s", err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	var replies []map[string]json.RawMessage
	var raw []string
	for sc.Scan() {
		line := sc.Text()
		raw = append(raw, line)
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "\xff")), &m); err != nil {
			t.Fatalf("reply %q is not JSON: %v", line, err)
		}
		replies = append(replies, m)
	}
	// The line that is no request gets no reply.
	if len(replies) != 6 {
		t.Fatalf("%d replies, want 6:\n%s", len(replies), out)
	}
	if got := string(replies[0]["return"]); got != "1700000000123" {
		t.Errorf("guest-sync returned %s, want the id", got)
	}
	if !strings.HasPrefix(raw[1], "\xff") || string(replies[1]["return"]) != "42" {
		t.Errorf("guest-sync-delimited replied %q, want 0xFF then the id", raw[1])
	}
	if got := string(replies[2]["return"]); got != "{}" {
		t.Errorf("guest-ping returned %s", got)
	}
	var info struct {
		Version  string `json:"version"`
		Commands []struct {
			Name    string `json:"name"`
			Enabled bool   `json:"enabled"`
		} `json:"supported_commands"`
	}
	if err := json.Unmarshal(replies[3]["return"], &info); err != nil || info.Version == "" || len(info.Commands) != 8 {
		t.Errorf("guest-info returned %s (%v)", replies[3]["return"], err)
	}
	var ifaces []struct {
		Name  string `json:"name"`
		HW    string `json:"hardware-address"`
		Addrs []struct {
			Type   string `json:"ip-address-type"`
			Addr   string `json:"ip-address"`
			Prefix int    `json:"prefix"`
		} `json:"ip-addresses"`
	}
	if err := json.Unmarshal(replies[4]["return"], &ifaces); err != nil {
		t.Fatalf("guest-network-get-interfaces returned %s: %v", replies[4]["return"], err)
	}
	// This host's loopback, as the guest's would be.
	found := false
	for _, i := range ifaces {
		if i.Name != "lo" {
			continue
		}
		for _, a := range i.Addrs {
			found = found || (a.Type == "ipv4" && a.Addr == "127.0.0.1" && a.Prefix == 8)
		}
		if i.HW != "00:00:00:00:00:00" {
			t.Errorf("lo's hardware address %q", i.HW)
		}
	}
	if !found {
		t.Errorf("no lo with 127.0.0.1/8 in %s", replies[4]["return"])
	}
	var e struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	}
	if err := json.Unmarshal(replies[5]["error"], &e); err != nil || e.Class != "CommandNotFound" || !strings.Contains(e.Desc, "guest-shutdown") {
		t.Errorf("an unknown command got %s", raw[5])
	}
}

// TestGuestAgentFreeze: the freeze commands answer as qemu-ga's and
// print the console markers (on stderr under "ga.sh -").
func TestGuestAgentFreeze(t *testing.T) {
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox not installed (scripts/install-deps.sh test installs busybox-static)")
	}
	script := filepath.Join(t.TempDir(), "ga.sh")
	if err := os.WriteFile(script, []byte(testguest.GuestAgentScript), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(busybox, "sh", script, "-")
	cmd.Stdin = strings.NewReader(strings.Join([]string{
		`{"execute":"guest-fsfreeze-status"}`,
		`{"execute":"guest-fsfreeze-freeze"}`,
		`{"execute":"guest-fsfreeze-status"}`,
		`{"execute":"guest-fsfreeze-thaw"}`,
		`{"execute":"guest-fsfreeze-status"}`,
		`{"execute":"guest-fsfreeze-thaw"}`,
	}, "\n") + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("guest agent: %v\n%s", err, out)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("reply %q is not JSON: %v", line, err)
		}
		got = append(got, string(m["return"]))
	}
	want := []string{`"thawed"`, `1`, `"frozen"`, `1`, `"thawed"`, `0`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("returns %v, want %v", got, want)
	}
	console := stderr.String()
	if n := testguest.CountMarker(console, testguest.MarkerGuestAgentFreeze); n != 3 {
		t.Errorf("%d freeze markers, want 3:\n%s", n, console)
	}
	if rest, ok := testguest.FindMarker(console, testguest.MarkerGuestAgentFreeze); !ok || rest != "state=frozen" {
		t.Errorf("first marker %q, want state=frozen", rest)
	}
}
