package command

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// serve --node-labels takes only the node's own labels: another is refused
// at start, naming the flag and the key, before the node joins or
// registers.
func TestServeRefusesAnAdminsNodeLabel(t *testing.T) {
	dir := t.TempDir()
	cmd := NewRootCommand()
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"serve", "--role", "node", "--data-dir", filepath.Join(dir, "data"), "--socket", filepath.Join(dir, "a.sock"),
		"--metrics-listen", "", "--node-labels", "node.virtplane.io/disk=ssd,tier=secure"})
	err := cmd.ExecuteContext(t.Context())
	if err == nil || !strings.Contains(err.Error(), "--node-labels[tier]: Forbidden: a node may set only labels under node.virtplane.io/") {
		t.Fatalf("serve --node-labels tier=secure: %v", err)
	}
}

func TestParseNodeLabels(t *testing.T) {
	req, err := parseNodeLabels("n1", []string{"tier=secure", "empty=", "rack-", "x=a-"})
	if err != nil {
		t.Fatal(err)
	}
	if req.Name != "n1" || len(req.Set) != 3 || req.Set["tier"] != "secure" || req.Set["empty"] != "" || req.Set["x"] != "a-" ||
		len(req.Remove) != 1 || req.Remove[0] != "rack" || req.Overwrite {
		t.Fatalf("parsed %v", req)
	}
	for _, bad := range [][]string{{"tier"}, {"-"}, {"a=1", "a=2"}, {"a=1", "a-"}} {
		if _, err := parseNodeLabels("n1", bad); err == nil {
			t.Errorf("%v: parsed", bad)
		}
	}
}
