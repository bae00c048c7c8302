// Package diskstest holds the test helpers of the node agent's disk room
// (package disks) that its own tests and the node agent's share: a skip
// for machines without qemu-img, files put in an image directory, and the
// names in a node's image list. It must not import package disks, whose
// internal tests import it.
package diskstest

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	apiv1 "github.com/virtplane/terraform-provider-virtplane/internal/api/v1"
)

// NeedQemuImg skips tb when qemu-img is not installed: images are
// inspected, listed and created with it.
func NeedQemuImg(tb testing.TB) {
	tb.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		tb.Skip("qemu-img not installed (Debian package qemu-utils)")
	}
}

// WriteFile writes data to path, creating its directory: an image, a
// kernel, or any file a test puts in place.
func WriteFile(tb testing.TB, path string, data []byte) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// SHA256 is the checksum of data as a node's image list carries it.
func SHA256(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}

// ImageNames is the names of items in order, separated by spaces.
func ImageNames(items []*apiv1.NodeImage) string {
	names := make([]string, len(items))
	for i, img := range items {
		names[i] = img.GetName()
	}
	return strings.Join(names, " ")
}
