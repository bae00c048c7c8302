package testutil

import (
	"testing"

	"github.com/virtplane/terraform-provider-virtplane/internal/testutil/proc"
)

// FreePort is a port of 127.0.0.1 that was free for network ("tcp" or
// "udp") a moment ago (proc.FreeAddr, which programs use); not finding
// one fails the test.
func FreePort(tb testing.TB, network string) int {
	tb.Helper()
	addr, err := proc.FreeAddr(network)
	if err != nil {
		tb.Fatal(err)
	}
	return int(addr.Port())
}
