package testguest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// Helpers for the tests that boot the guest under libvirt.

// EnvLibvirtURI names the libvirt URI those tests use; they skip when it
// is not set.
const EnvLibvirtURI = "VIRTPLANE_TEST_LIBVIRT_URI"

// ReachableDir is a new directory named after prefix, removed when t
// ends, that other users can enter: QEMU runs as libvirt-qemu under
// qemu:///system, and t.TempDir's parents are 0700.
func ReachableDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

var notNameChars = regexp.MustCompile(`[^A-Za-z0-9]+`)

// DomainName is a name for a test's transient domain: prefix, the test's
// name and random hex, so that runs sharing a libvirtd never collide.
func DomainName(t testing.TB, prefix string) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	short := strings.ToLower(notNameChars.ReplaceAllString(strings.TrimPrefix(t.Name(), "Test"), "-"))
	if len(short) > 24 {
		short = short[:24]
	}
	return fmt.Sprintf("%s-%s-%s", prefix, short, hex.EncodeToString(b))
}
